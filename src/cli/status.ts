/** `aerie status <run>`: what a run is doing or how it ended, with or without a worker. */
import { formatGpuHours } from '../bench/cost.js';
import type { PipelineResult, RunStatus } from '../shared.js';
import { resolveTemporal, webUiUrl } from '../temporal/connect.js';
import { reachTemporal } from './reach.js';
import { AerieStage } from '../workflows/search-attributes.js';
import { idleQueues } from './idle-queues.js';
import { describePending } from './phase.js';
import { pendingActivities, queryStatus, tableOf } from './follow-run.js';
import { failureTypeOf, fixLine, lastActivityFailureType } from './failure-fix.js';

export async function statusCommand(runId: string, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const target = await resolveTemporal();
  const client = await reachTemporal(target);
  try {
    const handle = client.workflow.getHandle(runId);
    const desc = await handle.describe();
    const state = desc.status.name.toLowerCase();
    out.write(`run ${runId}: ${state}\n`);
    if (desc.status.name === 'RUNNING') {
      // Queries need a worker; without one, the search attribute and heartbeats still tell a lot.
      const [status, pending] = await Promise.all([queryStatus(handle, 3000), pendingActivities(handle)]);
      const idle = await idleQueues(client, pending).catch(() => undefined);
      const phase = describePending(pending);
      if (status) {
        out.write(tableOf(status, phase) + '\n');
        if (status.stages.some((s) => s.state === 'waiting')) {
          out.write(`  ${status.error ?? 'waiting for an operator'}\n`);
          out.write(fixLine(await lastActivityFailureType(handle).catch(() => undefined)).replace(/^(?=.)/, '  '));
        }
      } else {
        const stage = desc.typedSearchAttributes.get(AerieStage);
        out.write(
          `  stage: ${String(stage ?? '?')}${phase ? ` — ${phase}` : ''}\n  (no worker is polling this run: start one with \`aerie worker\` or \`aerie resume ${runId}\`)\n`,
        );
      }
      if (idle) out.write(`  ${idle}\n`);
    } else if (desc.status.name === 'COMPLETED') {
      const result = (await handle.result()) as PipelineResult;
      out.write(tableOf({ runId, label: '', stages: result.stages } as RunStatus) + '\n');
      if (result.report) out.write(`\n${result.report.table}\nreport: ${result.report.paths.join(', ')}\n`);
      const cost = result.report?.summary?.cost;
      if (cost)
        out.write(
          `GPU-hours: ${cost.stages.map((s) => `${s.stage} ${formatGpuHours(s.gpuHours)}`).join(', ')}; total ${formatGpuHours(cost.totalGpuHours)}\n`,
        );
    } else {
      try {
        await handle.result();
      } catch (err) {
        let e = err as { message?: string; cause?: unknown };
        while (e.cause) e = e.cause as typeof e;
        const fix = fixLine(failureTypeOf(err)).replace(/^(?=.)/, '  ');
        out.write(`  ${state}: ${e.message}\n${fix}  after fixing the cause: aerie resume ${runId}\n`);
      }
    }
    const ui = webUiUrl(target, runId);
    if (ui) out.write(`Web UI: ${ui}\n`);
    return 0;
  } finally {
    await client.connection.close();
  }
}
