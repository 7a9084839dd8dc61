/**
 * Following a run from the terminal: a live stage table with the current phase from
 * heartbeats, until the workflow closes.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import proto from '@temporalio/proto';
import type { RunStatus } from '../shared.js';
import { renderStageTable } from '../workflows/status.js';
import { idleQueues } from './idle-queues.js';
import { describePending, type PendingActivity } from './phase.js';

export async function pendingActivities(handle: WorkflowHandle): Promise<PendingActivity[]> {
  const desc = await handle.describe();
  return (desc.raw.pendingActivities ?? []).map((p) => {
    let details: unknown;
    const payload = p.heartbeatDetails?.payloads?.[0];
    if (payload) {
      try {
        details = defaultPayloadConverter.fromPayload(payload);
      } catch {
        details = undefined;
      }
    }
    const at = p.scheduledTime;
    return {
      activityType: p.activityType?.name ?? '?',
      attempt: p.attempt ?? 1,
      details,
      lastFailure: p.lastFailure?.message ?? undefined,
      scheduled: p.state === proto.temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED,
      ...(at ? { scheduledAtMs: Number(at.seconds ?? 0) * 1000 + Math.round((at.nanos ?? 0) / 1e6) } : {}),
      ...(p.activityOptions?.taskQueue?.name ? { queue: p.activityOptions.taskQueue.name } : {}),
    };
  });
}

export async function queryStatus(handle: WorkflowHandle, timeoutMs = 5000): Promise<RunStatus | undefined> {
  const timeout = new Promise<undefined>((r) => setTimeout(() => r(undefined), timeoutMs).unref());
  return Promise.race([handle.query<RunStatus>('status').catch(() => undefined), timeout]);
}

/** A failure's note is the whole message, lists and all; in the table only its first line, the reason follows below it. */
export function tableOf(status: RunStatus, phase?: string): string {
  const oneLine = (note?: string) => {
    if (note === undefined) return undefined;
    const first = note.split('\n')[0]!.trimEnd();
    return first === note ? note : `${first} …`;
  };
  return renderStageTable(
    { ...status, stages: status.stages.map((s) => ({ ...s, note: oneLine(s.note) })) },
    oneLine(phase),
  );
}

/**
 * Each line cut to the terminal's width: the live table is redrawn by moving the cursor up
 * one row per line, and a line the terminal wrapped would leave its tail behind.
 */
export function fitWidth(text: string, columns: number | undefined): string {
  if (!columns || columns < 10) return text;
  return text
    .split('\n')
    .map((l) => (l.length > columns - 1 ? `${l.slice(0, columns - 2)}…` : l))
    .join('\n');
}

/** The line a log (not a terminal) gets for the running stage; never "stage: " with nothing after it. */
export function phaseLine(status: RunStatus, phase?: string): string | undefined {
  const stage = status.stages.find((s) => s.stage === status.current);
  // A stage that has just failed is left to the table and the reason printed after it.
  if (!stage || stage.state !== 'running') return undefined;
  return `${stage.stage}: ${phase ?? (stage.note || 'starting')}`;
}

/**
 * Between two activities of a stage nothing is pending: the last phase stands until the next
 * one (a stage's own note, when it has one, says more), so "starting" is only ever shown
 * before a stage's first activity. Returns the phase to show, given the one pending now.
 */
export function phaseMemory(): (status: RunStatus, now: string | undefined) => string | undefined {
  let last: { stage?: string; phase?: string } = {};
  return (status, now) => {
    if (now) {
      last = { stage: status.current, phase: now };
      return now;
    }
    if (status.stages.find((s) => s.stage === status.current)?.note) return undefined;
    return last.stage === status.current ? last.phase : 'starting';
  };
}

export interface FollowEnd {
  /** 'waiting': the run stopped to wait for an operator (it stays open); 'closed': it ended. */
  state: 'closed' | 'waiting';
  /** What the waiting run failed on, in full (the table shows its first line). */
  error?: string;
}

/** Redraws the table in place on a terminal; prints changes line by line otherwise. */
export async function followRun(
  client: Client,
  workflowId: string,
  out: NodeJS.WriteStream = process.stdout,
): Promise<FollowEnd> {
  const handle = client.workflow.getHandle(workflowId);
  const tty = out.isTTY === true;
  let drawn = 0;
  let lastPrinted = '';
  let done = false;
  const stickyPhase = phaseMemory();
  const result = handle.result().finally(() => (done = true));
  result.catch(() => undefined);
  while (!done) {
    const [status, pending] = await Promise.all([queryStatus(handle), pendingActivities(handle).catch(() => [])]);
    if (status?.stages.some((st) => st.state === 'waiting')) {
      if (tty && drawn) out.write(`\x1b[${drawn}A\x1b[J`);
      out.write(tableOf(status) + '\n');
      return { state: 'waiting', error: status.error };
    }
    if (status) {
      const idle = await idleQueues(client, pending).catch(() => undefined);
      const now = [describePending(pending), idle].filter(Boolean).join('; ') || undefined;
      const phase = stickyPhase(status, now);
      if (tty) {
        const table = fitWidth(tableOf(status, phase), out.columns);
        if (drawn) out.write(`\x1b[${drawn}A\x1b[J`);
        out.write(table + '\n');
        drawn = table.split('\n').length;
      } else {
        const line = phaseLine(status, phase);
        if (line !== undefined && line !== lastPrinted)
          out.write(`  ${new Date().toISOString().slice(11, 19)} ${line.split('\n')[0]}\n`);
        lastPrinted = line ?? lastPrinted;
      }
    }
    await Promise.race([result.catch(() => undefined), new Promise((r) => setTimeout(r, tty ? 500 : 1000))]);
  }
  const final = await queryStatus(handle, 3000);
  if (final) {
    if (tty && drawn) out.write(`\x1b[${drawn}A\x1b[J`);
    out.write(tableOf(final) + '\n');
  }
  return { state: 'closed' };
}
