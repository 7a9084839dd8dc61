/**
 * Faults before a server is ready, driven through the real pipeline workflow (real dev
 * server, real worker, real simulator processes): a crash during the load, a wrong
 * interpreter, CUDA out of memory, a load that never finishes, and a stale server already
 * holding the port. Each asserts the outcome, the classification, and how fast it was known.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/temporal/dev-server.js';
import { useTemporalSuite } from '../support/temporal.js';
import {
  detectionDelays,
  faultConfig,
  groupHasMembers,
  launchRecord,
  launchRecords,
  only,
  runPipeline,
} from './harness.js';
import { startSim, stopSim } from '../support/sim.js';

const suite = useTemporalSuite('aerie-load-faults-');

const POLL = 1000;

describe('server faults during startup, through the pipeline workflow', () => {
  it('a crash during the load fails readiness within two polls, with the log tail and a classification, and is relaunched', async () => {
    const workdir = join(suite.work, 'exit');
    const config = faultConfig(workdir, await freePort(), {
      AERIE_SIM_FAULT: 'exit-during-load',
      AERIE_SIM_TIME_SCALE: '0.05',
    });
    const runId = `exit-${Date.now()}`;
    const run = await runPipeline(suite.t, config, runId);

    expect(run.error).toMatch(
      /^generate failed: generate server pid \d+ exited while loading weights \(exit code 1\): safetensors_rust\.SafetensorError/,
    );
    // A generic crash is relaunched (three launches in all), never retried in place on a dead process.
    const gens = [0, 1, 2].map((g) => `${runId}.server-generate.${g}`);
    expect(await launchRecords(workdir)).toEqual(gens);
    const ready = only(run.activities, 'awaitServerReady');
    expect(ready).toHaveLength(3);
    for (const r of ready) {
      expect(r.outcome).toBe('failed');
      expect(r.attempt).toBe(1);
      expect(r.failure?.type).toBe('ServerCrashed');
      expect(r.failure?.nonRetryable).toBe(true);
      expect(r.failure?.details?.kind).toBe('crash');
      expect(r.failure?.details?.relaunch).toBe(true);
      expect(r.failure?.details?.exitCode).toBe(1);
      const tail = r.failure?.details?.logTail as string;
      expect(tail).toContain('Traceback (most recent call last):');
      expect(tail).toContain('SafetensorError');
      expect(tail.split('\n').length).toBeLessThanOrEqual(50);
    }
    const delays = await detectionDelays(workdir, run.activities, ['awaitServerReady']);
    expect(delays).toHaveLength(3);
    for (const d of delays) {
      expect(d.delayMs).toBeGreaterThanOrEqual(0);
      expect(d.delayMs).toBeLessThanOrEqual(2 * POLL);
    }
    // Every launch was stopped by its group before the next one.
    expect(only(run.activities, 'stopServer').map((s) => s.input.launch.launchId)).toEqual(gens);
    for (const id of gens) expect(await groupHasMembers((await launchRecord(workdir, id)).pgid)).toBe(false);
  }, 90_000);

  it('"No module named sglang" is non-retryable, names the interpreter, and is known in under 10 s', async () => {
    const workdir = join(suite.work, 'module');
    const config = faultConfig(workdir, await freePort(), { AERIE_SIM_FAULT: 'missing-module' });
    const runId = `module-${Date.now()}`;
    const run = await runPipeline(suite.t, config, runId);

    expect(run.error).toMatch(/generate server pid \d+ exited while starting \(exit code 1\)/);
    expect(run.error).toContain("/usr/bin/python3 cannot run sglang.launch_server (No module named 'sglang')");
    expect(run.error).toMatch(/Set server\.launcher/);
    expect(await launchRecords(workdir)).toEqual([`${runId}.server-generate.0`]);
    const [ready] = only(run.activities, 'awaitServerReady');
    expect(ready!.failure?.type).toBe('MissingDependencyError');
    expect(ready!.failure?.nonRetryable).toBe(true);
    expect(ready!.failure?.details?.interpreter).toBe('/usr/bin/python3');
    expect(ready!.attempt).toBe(1);
    const launchedAt = Date.parse((await launchRecord(workdir, `${runId}.server-generate.0`)).startedAt);
    expect(ready!.closedAt! - launchedAt).toBeLessThan(10_000);
    expect(run.closedAt - run.startedAt).toBeLessThan(10_000 + 5_000);
  }, 60_000);

  it('CUDA out of memory is non-retryable and says what to change', async () => {
    const workdir = join(suite.work, 'oom');
    const config = faultConfig(workdir, await freePort(), {
      AERIE_SIM_FAULT: 'oom-during-load',
      AERIE_SIM_TIME_SCALE: '0.02',
    });
    const runId = `oom-${Date.now()}`;
    const run = await runPipeline(suite.t, config, runId);

    expect(run.error).toMatch(/exited while loading weights/);
    expect(run.error).toMatch(/the GPU ran out of memory .*mem-fraction-static/);
    expect(await launchRecords(workdir)).toEqual([`${runId}.server-generate.0`]);
    const [ready] = only(run.activities, 'awaitServerReady');
    expect(ready!.failure?.type).toBe('OutOfMemoryError');
    expect(ready!.failure?.details?.kind).toBe('out-of-memory');
    expect(ready!.failure?.details?.logTail).toContain('torch.OutOfMemoryError: CUDA out of memory');
  }, 60_000);

  it('a server that never becomes ready fails at the budget, naming the last phase, and is stopped', async () => {
    const workdir = join(suite.work, 'never');
    const budget = 4000;
    const poll = 500;
    const config = faultConfig(
      workdir,
      await freePort(),
      { AERIE_SIM_FAULT: 'never-ready', AERIE_SIM_TIME_SCALE: '0.01' },
      (c) => {
        c.server.readiness.budget = budget;
        c.server.readiness['poll-interval'] = poll;
      },
    );
    const runId = `never-${Date.now()}`;
    const run = await runPipeline(suite.t, config, runId);

    expect(run.error).toMatch(
      /generate server pid \d+ not ready after [\d.]+ s \(budget 4\.0 s\); last phase from its log: warming up/,
    );
    expect(run.error).toMatch(/last \/health status: 503/);
    expect(await launchRecords(workdir)).toEqual([`${runId}.server-generate.0`]);
    const [ready] = only(run.activities, 'awaitServerReady');
    expect(ready!.failure?.type).toBe('ServerNotReady');
    expect(ready!.failure?.nonRetryable).toBe(true);
    const rec = await launchRecord(workdir, `${runId}.server-generate.0`);
    const tookMs = ready!.closedAt! - Date.parse(rec.startedAt);
    expect(tookMs).toBeGreaterThanOrEqual(budget);
    expect(tookMs).toBeLessThanOrEqual(budget + 2 * poll + 1500);
    expect(only(run.activities, 'stopServer')).toHaveLength(1);
    expect(await groupHasMembers(rec.pgid)).toBe(false);
  }, 60_000);

  it('a stale server already on the port is refused, named by pid, and nothing is launched', async () => {
    const workdir = join(suite.work, 'stale');
    // A simulator aerie did not launch, in a process group of its own, answering /health.
    const stale = await startSim({ AERIE_SIM_TIME_SCALE: '0.005' });
    const port = Number(new URL(stale.baseUrl).port);
    try {
      const config = faultConfig(workdir, port, {});
      const runId = `stale-${Date.now()}`;
      const run = await runPipeline(suite.t, config, runId);

      expect(run.error).toMatch(/preflight found 1 problem/);
      expect(run.error).toContain(`server.port: ${port} on local is held by pid ${stale.child.pid} (`);
      expect(await launchRecords(workdir)).toEqual([]);
      expect(only(run.activities, 'launchServer')).toEqual([]);
      // The stale server is someone else's: aerie did not stop it.
      expect(stale.child.exitCode).toBeNull();
    } finally {
      await stopSim(stale);
    }
  }, 60_000);
});
