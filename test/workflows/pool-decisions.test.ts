/**
 * The server pools' decisions (src/workflows/pool-lanes.ts, generate-pool.ts, extract-pool.ts),
 * in seconds, against stub activities: every server pulls batches off one queue, a server that
 * dies hands its batch back and is relaunched, a server that cannot start leaves the pool while
 * the others finish, a pool with no server left fails the stage, a server on another host
 * waits for that host's GPUs like a run would, and an extraction pool's servers each dump into
 * a folder of their own.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { demoConfig } from '../support/demo-config.js';
import { failure, StubActivities } from '../support/stub-activities.js';
import { useWorkflowEnv } from '../support/workflow-env.js';

const w = useWorkflowEnv();

/** The demo with three generate servers on GPU subsets of its host (ports 30000, 30001, 30002). */
function config(tweak: (c: Config) => void = () => undefined): Config {
  return demoConfig('/stub/work', 30000, (c) => {
    c.hosts.local!.gpus = [0, 1, 2, 3, 4, 5];
    c.stages.generate.servers = [0, 1, 2].map((i) => ({ gpus: [2 * i, 2 * i + 1], port: 30000 + i }));
    tweak(c);
  });
}

const plan = (batches: number) => () => ({
  total: batches,
  batches,
  batchSize: 1,
  samples: batches,
  planned: 0,
  resumed: 0,
});
const batchOk = (index: number) => ({ index, samples: 1, counts: { ok: 1, error: 0, skipped: 0 }, resumed: 0 });

/** Every generatePoolBatch call: the batch, the server's port, and whether it returned. */
function batches(stubs: StubActivities) {
  return stubs.calls
    .filter((c) => c.name === 'generatePoolBatch')
    .map((c) => {
      const i = c.input as { index: number; launch: { port: number; launchId: string } };
      return { index: i.index, port: i.launch.port, launchId: i.launch.launchId, ok: stubs.succeeded.includes(c) };
    });
}

/** Generate-server launches on one port (the other stages' servers use 30000 too). */
const launchesOn = (stubs: StubActivities, port: number) =>
  stubs.calls.filter((c) => {
    const i = c.input as { config: Config; role?: string };
    return c.name === 'launchServer' && i.role === 'generate' && i.config.server.port === port;
  }).length;

describe('the generate pool', () => {
  it('spreads the batches over every server; a dead server hands its batch back and is relaunched', async () => {
    let died = false;
    const stubs = new StubActivities().on('planGeneratePool', plan(9)).on('generatePoolBatch', (i) => {
      if (i.launch.port === 30001 && !died) {
        died = true;
        throw failure('ServerCrashed', 'the generate server died (exit 137) with 1 request in flight');
      }
      return batchOk(i.index);
    });
    const result = await w.runPipeline(stubs, { runId: 'pool-dies', config: config() }, (h) => h.result());
    expect(result.stages.every((s) => s.state === 'done')).toBe(true);
    const calls = batches(stubs);
    // Each batch finished exactly once, the failed one on a later call.
    expect(
      calls
        .filter((c) => c.ok)
        .map((c) => c.index)
        .sort((a, b) => a - b),
    ).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    const failed = calls.find((c) => !c.ok)!;
    expect(calls.filter((c) => c.index === failed.index).map((c) => c.ok)).toEqual([false, true]);
    // Every server took work; the dead one twice launched, once stopped for dying, and all stopped at the end.
    expect(new Set(calls.filter((c) => c.ok).map((c) => c.port))).toEqual(new Set([30000, 30001, 30002]));
    expect([launchesOn(stubs, 30000), launchesOn(stubs, 30001), launchesOn(stubs, 30002)]).toEqual([1, 2, 1]);
    expect(stubs.liveServers()).toEqual([]);
    expect(stubs.trace().filter((t) => t === 'combineGeneratePool')).toHaveLength(1);
    expect(stubs.trace()).not.toContain('generateData');
    // No target kept up for the baseline: it is measured in the benchmark stage.
    expect(stubs.trace().filter((t) => t.startsWith('benchmarkSweep baseline'))).toHaveLength(1);
  });

  it('a server that cannot start leaves the pool; the others do every batch and the note says so', async () => {
    const stubs = new StubActivities().on('planGeneratePool', plan(5)).on('awaitServerReady', (i) => {
      if (i.launch.port === 30002) throw failure('OutOfMemoryError', 'CUDA out of memory while loading');
      return { elapsedMs: 1, phase: 'ready', warnings: [], notes: [], startupRecord: '/stub/startup.json' };
    });
    const result = await w.runPipeline(stubs, { runId: 'pool-oom', config: config() }, (h) => h.result());
    const generate = result.stages.find((s) => s.stage === 'generate')!;
    expect(generate.state).toBe('done');
    expect(generate.note).toMatch(/on 3 servers; 1 of 3 servers left the pool$/);
    expect(batches(stubs).every((c) => c.ok && c.port !== 30002)).toBe(true);
    expect(batches(stubs)).toHaveLength(5);
    expect(stubs.liveServers()).toEqual([]);
  });

  it('fails the stage once no server is left and batches remain', async () => {
    const stubs = new StubActivities().on('planGeneratePool', plan(4)).on('generatePoolBatch', () => {
      throw failure('ServerCrashed', 'the generate server died (exit 139)');
    });
    const err = await w
      .runPipeline(stubs, { runId: 'pool-all-die', config: config() }, (h) => h.result())
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).cause?.message).toMatch(/^generate failed: the generate server died/);
    // Three deaths per server, then it leaves the pool.
    expect(batches(stubs)).toHaveLength(9);
    expect(stubs.liveServers()).toEqual([]);
    expect(stubs.trace()).not.toContain('combineGeneratePool');
  });

  it("a server on another host waits for that host's GPUs and gives them back after the stage", async () => {
    const stubs = new StubActivities().on('planGeneratePool', plan(3));
    const cfg = config((c) => {
      c.hosts['gpu-b'] = { ...c.hosts.local!, gpus: [3] };
      c.stages.generate.servers = [
        { port: 30000, gpus: [0] },
        { host: 'gpu-b', port: 30005 },
      ];
    });
    const result = await w.runPipeline(stubs, { runId: 'pool-hosts', config: cfg }, (h) => h.result());
    expect(result.stages.every((s) => s.state === 'done')).toBe(true);
    const asked = stubs.calls
      .filter((c) => c.name === 'launchServer')
      .map((c) => (c.input as { config: Config }).config);
    expect(
      asked
        .map((c) => `${c.target.host}:${c.server.port}:${c.hosts[c.target.host]!.gpus?.join(',')}`)
        .slice(0, 2)
        .sort(),
    ).toEqual(['gpu-b:30005:3', 'local:30000:0']);
    const leases = stubs.leaseCalls.map((c) => c.name);
    expect(leases.filter((n) => n === 'acquireGpuLease')).toHaveLength(2);
    expect(leases.filter((n) => n === 'releaseGpuLease')).toHaveLength(2);
  });

  it('an extraction pool runs every batch as an extraction on its server, each with its own dump folder, then merges once', async () => {
    const stubs = new StubActivities().on('planExtractPool', () => ({ samples: 5, batches: 5, batchSize: 1 }));
    const cfg = demoConfig('/stub/work', 30000, (c) => {
      c.hosts.local!.gpus = [0, 1];
      const e = c.stages.extract;
      if (e.driver === 'patched-server') e.servers = [{ gpus: [0] }, { gpus: [1], port: 30001 }];
    });
    const result = await w.runPipeline(stubs, { runId: 'xpool', config: cfg }, (h) => h.result());
    expect(result.stages.every((s) => s.state === 'done')).toBe(true);
    const batches = stubs.calls
      .filter((c) => c.name === 'extractHiddenStates')
      .map((c) => c.input as { batch?: number; config: Config; launch: { launchId: string } });
    expect(batches.map((b) => b.batch).sort()).toEqual([0, 1, 2, 3, 4]);
    const dumps = new Set(
      batches.map((b) => {
        const e = b.config.stages.extract;
        return `${b.launch.launchId} ${e.driver === 'patched-server' ? e['dump-dir'] : ''}`;
      }),
    );
    expect([...dumps].sort()).toEqual([
      'xpool.server-extract-s0.0 /stub/work/shm/s0',
      'xpool.server-extract-s1.0 /stub/work/shm/s1',
    ]);
    expect(stubs.trace().filter((t) => t === 'combineExtractPool')).toHaveLength(1);
    expect(stubs.liveServers()).toEqual([]);
  });
});
