/**
 * Kill the worker with SIGKILL while the drafter trains, start another, and check the run
 * completes with no finished stage redone and no second trainer launched — from the host's
 * process records, the ledger and the workflow history.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TASK_QUEUE, type PipelineResult } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

// The suite's afterAll SIGKILLs the workers, then stops what they launched by its launch record.
const suite = useTemporalSuite('aerie-crash-');
const startWorker = (name: string) => suite.startWorkerProcess(name);

const records = async (workdir: string) =>
  (await readdir(join(workdir, '.aerie', 'procs')).catch(() => [] as string[]))
    .filter((f) => f.endsWith('.json'))
    .sort();

describe('worker SIGKILL during training', () => {
  it('re-attaches to the running trainer and redoes nothing', async () => {
    const workdir = join(suite.work, 'host');
    const config = demoConfig(workdir, await freePort(), (c) => {
      // Slow enough that the trainer outlives the 30 s heartbeat timeout after the kill.
      c.stages.train.env.AERIE_SIM_TIME_SCALE = '0.6';
    });
    const runId = `crash-${Date.now()}`;
    const handle = await suite.t.client.workflow.start(pipeline, {
      taskQueue: TASK_QUEUE,
      workflowId: runId,
      args: [{ runId, config, configPath: 'test' }],
    });
    await startWorker('worker-1');

    const trainLog = join(workdir, 'runs', runId, 'train', 'train-0.log');
    // HEAD's trainer logs `step N: {...}` every log_interval steps (no tqdm meter off a TTY).
    await waitUntil(
      async () => /^step [1-9]\d*: \{/m.test(await readFile(trainLog, 'utf8').catch(() => '')),
      'the trainer to make progress',
      180_000,
    );
    const ledgerDir = join(workdir, 'runs', runId, '.aerie', 'ledger');
    const ledgerBefore = Object.fromEntries(
      await Promise.all(
        ['generate', 'extract'].map(async (s) => [s, await readFile(join(ledgerDir, `${s}.json`), 'utf8')] as const),
      ),
    );
    const trainRecord = JSON.parse(
      await readFile(join(workdir, '.aerie', 'procs', `${runId}.train.0.json`), 'utf8'),
    ) as { pid: number };

    suite.killWorkerProcess('worker-1'); // the fault: the worker's recorded group dies mid-stage
    await startWorker('worker-2');
    const result = (await handle.result()) as PipelineResult;

    expect(result.stages.every((s) => s.state === 'done')).toBe(true);
    // One trainer, one launch per server role: nothing launched twice.
    expect(await records(workdir)).toEqual(
      [
        `${runId}.server-generate.0`,
        `${runId}.server-extract.0`,
        `${runId}.train.0`,
        `${runId}.train-export.0`,
        `${runId}.server-deploy.0`,
      ]
        .map((r) => `${r}.json`)
        .sort(),
    );
    const trainAfter = JSON.parse(
      await readFile(join(workdir, '.aerie', 'procs', `${runId}.train.0.json`), 'utf8'),
    ) as { pid: number };
    expect(trainAfter.pid).toBe(trainRecord.pid);
    // Stages finished before the kill keep their ledger records untouched.
    for (const [stage, text] of Object.entries(ledgerBefore))
      expect(await readFile(join(ledgerDir, `${stage}.json`), 'utf8')).toBe(text);

    // The history agrees: each data stage ran once; training needed a second attempt (the kill) but one scheduling.
    const history = await handle.fetchHistory();
    const scheduled = new Map<string, number>();
    let trainAttempts = 0;
    const typeById = new Map<string, string>();
    for (const e of history.events ?? []) {
      const s = e.activityTaskScheduledEventAttributes;
      if (s) {
        const type = s.activityType?.name ?? '';
        scheduled.set(type, (scheduled.get(type) ?? 0) + 1);
        typeById.set(String(e.eventId), type);
      }
      const started = e.activityTaskStartedEventAttributes;
      if (started && typeById.get(String(started.scheduledEventId)) === 'trainDrafter')
        trainAttempts = started.attempt ?? 0;
    }
    expect(scheduled.get('generateData')).toBe(1);
    expect(scheduled.get('extractHiddenStates')).toBe(1);
    expect(scheduled.get('trainDrafter')).toBe(1);
    expect(trainAttempts).toBeGreaterThanOrEqual(2);
  }, 420_000);
});
