/**
 * Following a run from the terminal: a live stage table with the current phase from
 * heartbeats, until the workflow closes.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { RunStatus } from '../shared.js';
import { renderStageTable } from '../workflows/status.js';
import { describeActivity, type PendingActivity } from './phase.js';

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
    return {
      activityType: p.activityType?.name ?? '?',
      attempt: p.attempt ?? 1,
      details,
      lastFailure: p.lastFailure?.message ?? undefined,
    };
  });
}

export async function queryStatus(handle: WorkflowHandle, timeoutMs = 5000): Promise<RunStatus | undefined> {
  const timeout = new Promise<undefined>((r) => setTimeout(() => r(undefined), timeoutMs).unref());
  return Promise.race([handle.query<RunStatus>('status').catch(() => undefined), timeout]);
}

/**
 * Redraws the table in place on a terminal; prints changes line by line otherwise. Returns
 * 'waiting' when the run stopped to wait for an operator (it stays open), else 'closed'.
 */
export async function followRun(client: Client, workflowId: string, out: NodeJS.WriteStream = process.stdout): Promise<'closed' | 'waiting'> {
  const handle = client.workflow.getHandle(workflowId);
  const tty = out.isTTY === true;
  let drawn = 0;
  let lastPrinted = '';
  let done = false;
  const result = handle.result().finally(() => (done = true));
  result.catch(() => undefined);
  while (!done) {
    const [status, pending] = await Promise.all([queryStatus(handle), pendingActivities(handle).catch(() => [])]);
    if (status?.stages.some((st) => st.state === 'waiting')) {
      if (tty && drawn) out.write(`\x1b[${drawn}A\x1b[J`);
      out.write(renderStageTable(status) + '\n');
      return 'waiting';
    }
    if (status) {
      const phase = pending.length ? pending.map(describeActivity).join('; ') : undefined;
      const table = renderStageTable(status, phase);
      if (tty) {
        if (drawn) out.write(`\x1b[${drawn}A\x1b[J`);
        out.write(table + '\n');
        drawn = table.split('\n').length;
      } else {
        const line = `${status.current ?? ''}: ${phase ?? status.stages.find((s) => s.stage === status.current)?.note ?? ''}`;
        if (line !== lastPrinted) out.write(`  ${new Date().toISOString().slice(11, 19)} ${line}\n`);
        lastPrinted = line;
      }
    }
    await Promise.race([result.catch(() => undefined), new Promise((r) => setTimeout(r, tty ? 500 : 1000))]);
  }
  const final = await queryStatus(handle, 3000);
  if (final) {
    if (tty && drawn) out.write(`\x1b[${drawn}A\x1b[J`);
    out.write(renderStageTable(final) + '\n');
  }
  return 'closed';
}
