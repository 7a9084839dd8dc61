/**
 * A run whose host names a task queue no worker polls waits forever without a word: its
 * activities sit scheduled. The CLI says so, from Temporal's own view: the pending activity's
 * queue and state, and the queue's pollers.
 */
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { PendingActivity } from './phase.js';

export interface QueueWait {
  queue: string;
  activity: string;
  waitingMs: number;
}

/** Activities scheduled on a named queue and not started for at least minMs (a worker would take one in milliseconds). */
export function waitingOnQueues(pending: readonly PendingActivity[], nowMs: number, minMs = 15_000): QueueWait[] {
  const out: QueueWait[] = [];
  for (const a of pending) {
    if (!a.scheduled || !a.queue || a.scheduledAtMs === undefined) continue;
    const waitingMs = nowMs - a.scheduledAtMs;
    if (waitingMs >= minMs) out.push({ queue: a.queue, activity: a.activityType, waitingMs });
  }
  return out;
}

/** The waits whose queue has no activity poller at all (a busy worker still polls). */
export async function unpolledQueues(client: Client, waits: readonly QueueWait[]): Promise<QueueWait[]> {
  const polled = new Map<string, boolean>();
  for (const w of waits) {
    if (polled.has(w.queue)) continue;
    const r = await client.workflowService
      .describeTaskQueue({
        namespace: client.options.namespace,
        taskQueue: { name: w.queue, kind: proto.temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
        taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
      })
      .catch(() => undefined);
    // An answer we could not get is no evidence: say nothing rather than cry wolf.
    polled.set(w.queue, r === undefined || (r.pollers ?? []).length > 0);
  }
  return waits.filter((w) => !polled.get(w.queue));
}

export function idleQueueNote(waits: readonly QueueWait[]): string | undefined {
  const first = new Map<string, QueueWait>();
  for (const w of waits) if (!first.has(w.queue) || first.get(w.queue)!.waitingMs < w.waitingMs) first.set(w.queue, w);
  if (first.size === 0) return undefined;
  return [...first.values()]
    .map(
      (w) =>
        `no worker polls task queue ${w.queue} (${w.activity} waiting ${Math.round(w.waitingMs / 1000)} s): start \`aerie worker --task-queue ${w.queue}\` on a machine that reaches the host that names it`,
    )
    .join('; ');
}

/** The note for a run's pending activities, or undefined when every queue they wait on is polled. */
export async function idleQueues(client: Client, pending: readonly PendingActivity[]): Promise<string | undefined> {
  const waits = waitingOnQueues(pending, Date.now());
  if (waits.length === 0) return undefined;
  return idleQueueNote(await unpolledQueues(client, waits));
}
