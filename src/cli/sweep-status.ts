/**
 * `aerie status <sweep>`: the sweep's state and each child run's, without a worker: the variants
 * from the parent's input in its history, each child's state and stage from Temporal's own
 * description of it (status and the AerieStage search attribute).
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { resolveTemporal, webUiUrl } from '../temporal/connect.js';
import type { SweepInput } from '../workflows/drafter-sweep.js';
import { AerieStage } from '../workflows/search-attributes.js';
import { reachTemporal } from './reach.js';
import { shownPath } from './run-folder.js';
import { sweepFolder, sweepWorkflowId } from './sweep-ids.js';

/** Is this id a sweep's (its parent workflow's id, or a sweep with a local folder)? */
export async function isSweepId(id: string): Promise<boolean> {
  if (id.startsWith('aerie-sweep-')) return true;
  return stat(sweepFolder(id)).then(
    () => true,
    () => false,
  );
}

async function childLine(client: Client, label: string, runId: string): Promise<string> {
  try {
    const d = await client.workflow.getHandle(runId).describe();
    const stage =
      d.status.name === 'RUNNING' ? ` (stage ${String(d.typedSearchAttributes.get(AerieStage) ?? '?')})` : '';
    return `  ${label.padEnd(24)} ${runId}  ${d.status.name.toLowerCase()}${stage}\n`;
  } catch {
    return `  ${label.padEnd(24)} ${runId}  not started\n`;
  }
}

export async function sweepStatusCommand(
  id: string,
  out: { write(s: string): unknown } = process.stdout,
): Promise<number> {
  const sweepId = id.replace(/^aerie-sweep-/, '');
  const target = await resolveTemporal();
  const client = await reachTemporal(target);
  try {
    const handle = client.workflow.getHandle(sweepWorkflowId(sweepId));
    const desc = await handle.describe();
    const history = await handle.fetchHistory();
    const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    if (!payload) throw new Error(`cannot find the input of sweep ${sweepId} in its history`);
    const input = defaultPayloadConverter.fromPayload(payload) as SweepInput;
    out.write(`sweep ${sweepId}: ${desc.status.name.toLowerCase()}\n`);
    if (input.shared) out.write(await childLine(client, `shared (to ${input.shared.until})`, input.shared.runId));
    for (const v of input.variants) out.write(await childLine(client, v.label, v.runId));
    const report = join(sweepFolder(sweepId), 'sweep.md');
    if (
      await stat(report).then(
        () => true,
        () => false,
      )
    )
      out.write(`report: ${shownPath(report)}\n`);
    const ui = webUiUrl(target, sweepWorkflowId(sweepId));
    if (ui) out.write(`Web UI: ${ui}\n`);
    return 0;
  } finally {
    await client.connection.close();
  }
}
