/**
 * Faults once a server answers, through the real pipeline workflow: a crash on the first
 * real decode (caught by the smoke test, or — when the smoke test is too short to decode —
 * by the stage that uses the server), and a worker lost while a server loads (the retried
 * readiness attempt continues the same launch).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { HostPool } from '../../src/hosts/index.js';
import { TASK_QUEUE, type RunStatus } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { createWorker } from '../../src/worker.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';
import {
  activityRuns,
  detectionDelays,
  exitedAt,
  faultConfig,
  groupHasMembers,
  launchRecord,
  launchRecords,
  only,
  runPipeline,
} from './harness.js';

const suite = useTemporalSuite('aerie-serving-faults-');

const POLL = 1000;
const generateDone = (s: RunStatus) => s.stages.find((x) => x.stage === 'generate')?.state === 'done';

describe('server faults after ready, through the pipeline workflow', () => {
  it('a crash on the first decode is caught by the smoke test; the group is stopped and the relaunch succeeds', async () => {
    const workdir = join(suite.work, 'smoke');
    const config = faultConfig(workdir, await freePort(), {
      AERIE_SIM_FAULT: 'crash-first-decode',
      AERIE_SIM_FAULT_ONCE: join(workdir, 'fault-fired'),
    });
    const runId = `smoke-${Date.now()}`;
    const run = await runPipeline(suite.t, config, runId, { cancelWhen: generateDone });

    expect(run.cancelled).toBe(true);
    const [gen0, gen1] = [`${runId}.server-generate.0`, `${runId}.server-generate.1`];
    expect((await launchRecords(workdir)).filter((id) => id.includes('.server-generate.'))).toEqual([gen0, gen1]);

    const smoke = only(run.activities, 'smokeTest');
    expect(smoke.map((s) => s.outcome)).toEqual(['failed', 'completed']);
    const failure = smoke[0]!.failure!;
    expect(failure.type).toBe('ServerCrashed');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(
      /^generate server pid \d+ died on its first generation \(exit code 1\): AttributeError: 'EAGLEWorkerV2' object has no attribute 'spec_disable_batch_threshold'/,
    );
    expect(failure.details?.logTail).toContain('Traceback (most recent call last):');
    expect(smoke[0]!.input.launch.launchId).toBe(gen0);
    expect(smoke[1]!.input.launch.launchId).toBe(gen1);

    // Ready first (health passed), then dead on the first real request.
    const ready = only(run.activities, 'awaitServerReady');
    expect(ready.slice(0, 2).map((r) => r.outcome)).toEqual(['completed', 'completed']);
    expect((await exitedAt(workdir, gen0))?.code).toBe(1);
    const [delay] = await detectionDelays(workdir, run.activities, ['smokeTest']);
    expect(delay!.delayMs).toBeLessThanOrEqual(2 * POLL);

    // Our group was stopped before the relaunch, and the relaunch served the stage.
    const order = run.activities.map((a) => `${a.type}:${a.input?.launch?.launchId ?? a.input?.role ?? ''}`);
    expect(order.indexOf(`stopServer:${gen0}`)).toBeLessThan(
      order.indexOf('launchServer:generate', order.indexOf(`smokeTest:${gen0}`)),
    );
    expect(await groupHasMembers((await launchRecord(workdir, gen0)).pgid)).toBe(false);
    expect(only(run.activities, 'generateData').map((g) => g.outcome)).toEqual(['completed']);
  }, 90_000);

  it('a server that dies while the generate stage uses it is noticed by that stage, relaunched, and the stage resumes', async () => {
    const workdir = join(suite.work, 'in-use');
    // One smoke token has no decode step, so the first decode happens inside the stage.
    const config = faultConfig(
      workdir,
      await freePort(),
      { AERIE_SIM_FAULT: 'crash-first-decode', AERIE_SIM_FAULT_ONCE: join(workdir, 'fault-fired') },
      (c) => {
        c.server.readiness['smoke-tokens'] = 1;
      },
    );
    const runId = `in-use-${Date.now()}`;
    const run = await runPipeline(suite.t, config, runId, { cancelWhen: generateDone });

    const [gen0, gen1] = [`${runId}.server-generate.0`, `${runId}.server-generate.1`];
    expect((await launchRecords(workdir)).filter((id) => id.includes('.server-generate.'))).toEqual([gen0, gen1]);
    expect(only(run.activities, 'smokeTest').map((s) => s.outcome)).toEqual(['completed', 'completed']);
    const stage = only(run.activities, 'generateData');
    expect(stage.map((g) => g.outcome)).toEqual(['failed', 'completed']);
    expect(stage[0]!.attempt).toBe(1);
    expect(stage[0]!.failure?.type).toBe('ServerCrashed');
    expect(stage[0]!.failure?.message).toMatch(
      /^generate server pid \d+ died while in use \(exit code 1\): AttributeError/,
    );
    expect(stage[0]!.failure?.details?.logTail).toContain('spec_disable_batch_threshold');
    expect(stage[1]!.input.launch.launchId).toBe(gen1);
    const [delay] = await detectionDelays(workdir, run.activities, ['generateData']);
    expect(delay!.delayMs).toBeLessThanOrEqual(2 * POLL);
    expect(await groupHasMembers((await launchRecord(workdir, gen0)).pgid)).toBe(false);
  }, 90_000);

  it('a worker lost while the server loads: the retried readiness attempt continues the same launch', async () => {
    const workdir = join(suite.work, 'reattach');
    // A load of several seconds, so the first worker is gone well before the server is ready.
    const config = faultConfig(workdir, await freePort(), { AERIE_SIM_TIME_SCALE: '0.3' }, (c) => {
      c.server.readiness['poll-interval'] = 500;
    });
    const runId = `reattach-${Date.now()}`;
    const handle = await suite.t.client.workflow.start(pipeline, {
      taskQueue: TASK_QUEUE,
      workflowId: runId,
      args: [{ runId, config, configPath: 'test' }],
    });
    const beats: Record<string, unknown>[] = [];

    const first = await createWorker({
      connection: suite.t.nativeConnection,
      workflowBundle: suite.t.bundle,
      hosts: new HostPool(),
      taskQueue: TASK_QUEUE,
    });
    // Worker 1 runs until readiness has heartbeated while the weights load, then shuts down.
    const log = join(workdir, 'runs', runId, 'logs', 'server-generate-0.log');
    await first.worker.runUntil(
      waitUntil(
        async () => {
          const text = await readFile(log, 'utf8').catch(() => '');
          if (!text.includes('Load weight begin') || text.includes('Load weight end')) return false;
          const d = await handle.describe();
          const pending = (d.raw.pendingActivities ?? []).find((a) => a.activityType?.name === 'awaitServerReady');
          const payload = pending?.heartbeatDetails?.payloads?.[0];
          if (!payload) return false;
          beats.push(defaultPayloadConverter.fromPayload(payload) as Record<string, unknown>);
          return true;
        },
        'a readiness heartbeat during the load',
        60_000,
        100,
      ),
    );
    await first.hosts.closeAll();

    const second = await createWorker({
      connection: suite.t.nativeConnection,
      workflowBundle: suite.t.bundle,
      hosts: new HostPool(),
      taskQueue: TASK_QUEUE,
    });
    await second.worker.runUntil(async () => {
      await waitUntil(
        async () => generateDone(await handle.query<RunStatus>('status')),
        'the generate stage to finish',
        60_000,
      );
      await handle.cancel();
      await handle.result().catch(() => undefined);
    });
    await second.hosts.closeAll();

    // Small heartbeat details: phase, elapsed, last HTTP status, log offset (and a progress line).
    const beat = beats[beats.length - 1]!;
    expect(Object.keys(beat).sort()).toEqual(expect.arrayContaining(['elapsedMs', 'lastHttp', 'logOffset', 'phase']));
    expect(Object.keys(beat).every((k) => ['elapsedMs', 'lastHttp', 'logOffset', 'phase', 'detail'].includes(k))).toBe(
      true,
    );
    expect(JSON.stringify(beat).length).toBeLessThan(400);

    // One launch: the second attempt re-attached to the loading server instead of starting another.
    expect((await launchRecords(workdir)).filter((id) => id.includes('.server-generate.'))).toEqual([
      `${runId}.server-generate.0`,
    ]);
    const runs = await activityRuns(handle);
    expect(only(runs, 'launchServer').filter((l) => l.input.role === 'generate')).toHaveLength(1);
    const ready = only(runs, 'awaitServerReady')[0]!;
    expect(ready.outcome).toBe('completed');
    expect(ready.attempt).toBeGreaterThanOrEqual(2);
    // The budget and elapsed time run from the launch, across attempts.
    const launchedAt = Date.parse((await launchRecord(workdir, `${runId}.server-generate.0`)).startedAt);
    expect(ready.result.elapsedMs).toBeGreaterThan(ready.closedAt! - launchedAt - 1500);
    expect(only(runs, 'generateData').map((g) => g.outcome)).toEqual(['completed']);
  }, 120_000);
});
