/**
 * After a failure retrying cannot fix, a run configured to wait holds still for an operator;
 * `retry` (an update with a validator) re-runs it from the failed stage once the cause is fixed.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { HostPool } from '../../src/hosts/index.js';
import { TASK_QUEUE, type PipelineResult, type RunStatus } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { createWorker } from '../../src/worker.js';
import { retryUpdate, statusQuery } from '../../src/workflows/pipeline.js';
import { demoConfig } from '../support/demo-config.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-operator-');

describe('operator actions', () => {
  it('waits after a non-retryable failure, refuses a bad retry, and retries from the failed stage', async () => {
    const workdir = join(suite.work, 'host');
    const config = demoConfig(workdir, await freePort(), (c) => {
      c.run['on-failure'] = 'wait';
      c.stages.benchmark.concurrencies = [1];
      // The wrong interpreter, once: the operator "fixes" it, and the retry finds it fixed.
      c.server.env.AERIE_SIM_FAULT = 'missing-module';
      c.server.env.AERIE_SIM_FAULT_ONCE = join(workdir, 'fault-fired');
    });
    const runId = `operator-${Date.now()}`;
    const hosts = new HostPool();
    const { worker } = await createWorker({
      connection: suite.t.nativeConnection,
      workflowBundle: suite.t.bundle,
      hosts,
    });
    const result = await worker.runUntil(async () => {
      const handle = await suite.t.client.workflow.start(pipeline, {
        taskQueue: TASK_QUEUE,
        workflowId: runId,
        args: [{ runId, config, configPath: 'test' }],
      });
      const waiting = await waitUntil(async () => {
        const s: RunStatus = await handle.query(statusQuery);
        return s.stages.find((x) => x.state === 'waiting');
      }, 'the run to wait for an operator');
      expect(waiting.stage).toBe('generate');
      expect(waiting.note).toMatch(/sglang/);
      expect(waiting.note).toContain(`aerie retry ${runId}`);
      expect((await handle.describe()).status.name).toBe('RUNNING');

      // The validator refuses a stage after the failed one, and the run keeps waiting.
      await expect(handle.executeUpdate(retryUpdate, { args: [{ stage: 'train' }] })).rejects.toBeInstanceOf(
        WorkflowUpdateFailedError,
      );
      expect((await handle.query(statusQuery)).stages.find((x) => x.stage === 'generate')?.state).toBe('waiting');

      expect(await handle.executeUpdate(retryUpdate, { args: [{}] })).toBe(`retrying ${runId} from generate`);
      return (await handle.result()) as PipelineResult;
    });
    await hosts.closeAll();
    expect(result.stages.map((s) => s.state)).toEqual(['done', 'done', 'done', 'done', 'done', 'done']);
    const launches = (await readdir(join(workdir, '.aerie', 'procs'))).filter(
      (f) => f.endsWith('.json') && f.includes('server-generate'),
    );
    expect(launches.sort()).toEqual([`${runId}.server-generate.0.json`, `${runId}.server-generate.1.json`]);
  }, 240_000);
});
