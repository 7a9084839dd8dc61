/** Operator actions on a run: `aerie retry` after a fix, `aerie cancel` to stop everything it started. */
import type { RetryRequest, StageName } from '../shared.js';
import { STAGES } from '../shared.js';
import { resolveTemporal } from '../temporal/connect.js';
import { reachTemporal } from './reach.js';
import { retryUpdate } from '../workflows/pipeline.js';
import { attach, type RunOptions } from './run.js';

export async function retryCommand(runId: string, stage: string | undefined, opts: RunOptions): Promise<number> {
  if (stage !== undefined && !(STAGES as readonly string[]).includes(stage)) {
    process.stderr.write(`aerie retry: unknown stage "${stage}"; stages: ${STAGES.join(', ')}\n`);
    return 2;
  }
  const target = await resolveTemporal();
  const client = await reachTemporal(target);
  try {
    const req: RetryRequest = stage ? { stage: stage as StageName } : {};
    // The update's validator refuses a run that is not waiting, before anything changes.
    const said = await client.workflow.getHandle(runId).executeUpdate(retryUpdate, { args: [req] });
    (opts.out ?? process.stdout).write(`${said}\n`);
    return await attach(target, client, runId, opts);
  } finally {
    await client.connection.close();
  }
}

/**
 * Cancel the run. Its own cleanup stops the servers and jobs it launched (by their recorded
 * process groups), so a worker must be running for that; by default one runs here until the
 * run has closed.
 */
export async function cancelCommand(runId: string, opts: RunOptions): Promise<number> {
  const target = await resolveTemporal();
  const client = await reachTemporal(target);
  try {
    await client.workflow.getHandle(runId).cancel();
    (opts.out ?? process.stdout).write(`cancel requested for ${runId}; stopping what it launched\n`);
    const code = await attach(target, client, runId, opts);
    return code === 1 ? 0 : code;
  } finally {
    await client.connection.close();
  }
}
