/**
 * The researcher's Ctrl-C, then `aerie cancel`: the worker that ran the training activity is
 * gone (SIGKILLed here), so the trainer on the host keeps running as it should for a resume.
 * Cancelling the run must still stop it: the training activity never hears the cancel (its
 * worker is dead), so the run's cleanup finds the trainer by its launch record and stops it
 * before the run closes. Real CLI, real worker process, real dev server, the simulator.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { AERIE_HOME } from '../../src/config/load.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { AerieStage } from '../../src/workflows/index.js';
import { run } from '../support/processes.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-cancel-orphan-');
const AERIE = join(AERIE_HOME, 'bin', 'aerie.mjs');

const env = () => ({
  TEMPORAL_ADDRESS: suite.t.server.address,
  TEMPORAL_NAMESPACE: 'default',
  AERIE_STATE_DIR: join(suite.work, 'state'),
});

async function slowTrainConfig(): Promise<string> {
  const doc = YAML.parse(await readFile(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8')) as Record<string, any>;
  doc.hosts.local.workdir = join(suite.work, 'host');
  doc.server.port = await freePort();
  doc.stages.extract['dump-dir'] = join(suite.work, 'host', 'dumps');
  doc.stages.train.env.AERIE_SIM_TIME_SCALE = '1';
  doc.run.label = 'orphan';
  // Long enough that the cancel lands before the dead worker's activity times out (and is
  // retried on the cancel's own worker, which would stop the trainer itself).
  doc.run['heartbeat-timeout'] = '60s';
  const path = join(suite.work, 'orphan.yaml');
  await writeFile(path, YAML.stringify(doc));
  return path;
}

describe('aerie cancel after the worker is gone', () => {
  it('stops the trainer the dead worker left running, by its launch record, and the run ends cancelled', async () => {
    await suite.startWorkerProcess('worker');
    const following = run(process.execPath, [AERIE, 'run', await slowTrainConfig(), '--no-worker'], {
      cwd: suite.work,
      env: env(),
      timeoutMs: 400_000,
    });
    const client = suite.t.client;
    const runId = await waitUntil(
      async () => {
        for await (const w of client.workflow.list({ query: `WorkflowType="pipeline" AND ExecutionStatus="Running"` }))
          return w.workflowId;
        return undefined;
      },
      'the run to start',
      60_000,
    );
    const host = suite.hostAt('host');
    const trainer = await waitUntil(
      async () => {
        const d = await client.workflow.getHandle(runId).describe();
        if (d.typedSearchAttributes.get(AerieStage) !== 'train') return undefined;
        for (const rec of await host.listLaunches())
          if (rec.launchId.startsWith(`${runId}.train.`) && (await host.procStatus(rec)).state === 'alive') return rec;
        return undefined;
      },
      'the trainer to be running',
      240_000,
    );
    suite.killWorkerProcess('worker');
    // Still running without its worker: aerie leaves a job alone when only the worker died.
    expect((await host.procStatus(trainer)).state).toBe('alive');

    const c = await run(process.execPath, [AERIE, 'cancel', runId], {
      cwd: suite.work,
      env: env(),
      timeoutMs: 300_000,
    });
    expect(c.code, c.stdout + c.stderr).toBe(0);
    expect((await client.workflow.getHandle(runId).describe()).status.name).toBe('CANCELLED');
    expect((await host.procStatus(trainer)).state).not.toBe('alive');
    expect((await host.procStatus(trainer)).state).not.toBe('orphans');
    // It was the run's cleanup that stopped it (the training activity never heard the cancel).
    const events = (await client.workflow.getHandle(runId).fetchHistory()).events ?? [];
    const scheduled = events.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'stopRunLeftovers',
    );
    expect(scheduled).toBeDefined();
    const completed = events.find(
      (e) => e.activityTaskCompletedEventAttributes?.scheduledEventId?.toString() === scheduled!.eventId?.toString(),
    );
    const payload = completed?.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data;
    const result = JSON.parse(Buffer.from(payload ?? []).toString('utf8')) as { stopped: string[] };
    expect(result.stopped).toContain(trainer.launchId);
    const r = await following;
    expect(r.stdout).toContain(`run ${runId} cancelled`);
  }, 480_000);
});
