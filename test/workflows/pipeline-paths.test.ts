/**
 * The pipeline's paths through its stages as the config chooses them, against stub
 * activities (see pipeline-decisions.test.ts): which servers each extract driver launches,
 * what train is handed, where the baseline is measured. Each test asserts the calls in order.
 */
import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { demoConfig, legacyDemoConfig } from '../support/demo-config.js';
import { failure, serve, StubActivities } from '../support/stub-activities.js';
import { useWorkflowEnv } from '../support/workflow-env.js';

const w = useWorkflowEnv();

const run = (stubs: StubActivities, runId: string, config: Config) =>
  w.runPipeline(stubs, { runId, config }, (h) => h.result());

/** The calls between two trace lines, both included. */
function between(trace: string[], first: string, last: string): string[] {
  const from = trace.indexOf(first);
  return trace.slice(from, trace.indexOf(last, from) + 1);
}

describe('pipeline paths by config', { timeout: 30_000 }, () => {
  it('stock-server extract: an aux pass and a final pass, each on its own server launched for it', async () => {
    const stubs = new StubActivities();
    const config = demoConfig('/stub/work', 30000, (c) => {
      const e = c.stages.extract;
      if (e.driver !== 'patched-server') throw new Error('the demo extracts with patched-server');
      const { 'dump-dir': _ram, ...rest } = e;
      c.stages.extract = { ...rest, driver: 'stock-server' };
    });
    await run(stubs, 'stock', config);
    expect(between(stubs.trace(), 'checkLedger extract', 'writeLedger extract')).toEqual([
      'checkLedger extract',
      'checkExtractSpace',
      'launchServer extract/aux',
      ...serve('stock.server-extract.0', 'extractHiddenStates/aux'),
      'launchServer extract/final',
      ...serve('stock.server-extract.1', 'extractHiddenStates/final'),
      'writeLedger extract',
    ]);
  });

  it("specforge-offline extract launches no server; train gets its files and preflight's SpecForge revision", async () => {
    const stubs = new StubActivities().on('preflight', () => ({
      note: 'ok',
      checks: [],
      specforge: 'v0.2.0',
      sglang: { version: '0.5.4', how: 'pinned' },
    }));
    await run(stubs, 'offline', legacyDemoConfig('/stub/work', 30000));
    expect(between(stubs.trace(), 'checkLedger extract', 'writeLedger train')).toEqual([
      'checkLedger extract',
      'checkExtractSpace',
      'extractOffline',
      'writeLedger extract',
      'checkLedger train',
      'trainDrafter',
      'writeLedger train',
    ]);
    const input = (name: string) =>
      stubs.calls.find((c) => c.name === name)!.input as unknown as Record<string, unknown>;
    expect(input('extractOffline')).toMatchObject({ dataPath: '/stub/data/train.jsonl', specforge: 'v0.2.0' });
    expect(input('trainDrafter')).toMatchObject({
      dataPath: '/stub/data/train.jsonl',
      specforge: 'v0.2.0',
      hidden: { dir: '/stub/hidden', layout: 'specforge' },
    });
    expect(stubs.launched).toEqual(['offline.server-generate.0', 'offline.server-deploy.0']);
  });

  it('a baseline that fails on the generate server is measured in the benchmark stage on a baseline server', async () => {
    const stubs = new StubActivities().on('benchmarkSweep', (i) => {
      if (i.launch.role === 'generate') throw failure('BenchmarkFailed', 'level 4: 3 of 4 requests failed');
      return { records: [], notes: [] };
    });
    const result = await run(stubs, 'nobase', demoConfig('/stub/work', 30000));
    const t = stubs.trace();
    expect(between(t, 'launchServer generate', 'writeLedger generate')).toEqual([
      'launchServer generate',
      ...serve('nobase.server-generate.0', 'generateData', 'benchmarkSweep baseline'),
      'writeLedger generate',
    ]);
    expect(between(t, 'storedSweep baseline', 'writeLedger benchmark')).toEqual([
      'storedSweep baseline',
      'launchServer baseline',
      ...serve('nobase.server-baseline.0', 'benchmarkSweep baseline'),
      'writeReport',
      'writeLedger benchmark',
    ]);
    expect(result.stages.map((s) => s.state)).toEqual(['done', 'done', 'done', 'done', 'done', 'done']);
  });

  it('without reuse-generate-server the generate server measures nothing; without a baseline no baseline server runs', async () => {
    const noReuse = new StubActivities();
    await run(
      noReuse,
      'noreuse',
      demoConfig('/stub/work', 30000, (c) => (c.stages.benchmark['reuse-generate-server'] = false)),
    );
    expect(noReuse.trace().filter((x) => x.startsWith('benchmarkSweep'))).toEqual([
      'benchmarkSweep eagle3 noreuse.server-deploy.0',
      'benchmarkSweep baseline noreuse.server-baseline.0',
    ]);

    const none = new StubActivities();
    await run(
      none,
      'nobaseline',
      demoConfig('/stub/work', 30000, (c) => (c.stages.benchmark.baseline = false)),
    );
    expect(none.trace().filter((x) => x.startsWith('benchmarkSweep') || x.startsWith('storedSweep'))).toEqual([
      'benchmarkSweep eagle3 nobaseline.server-deploy.0',
    ]);
    expect(none.launched).toEqual([
      'nobaseline.server-generate.0',
      'nobaseline.server-extract.0',
      'nobaseline.server-deploy.0',
    ]);
  });

  it('schedules every activity that heartbeats with run.heartbeat-timeout, and the quick ones with none', async () => {
    const stubs = new StubActivities();
    const config = demoConfig('/stub/work', 30000, (c) => (c.run['heartbeat-timeout'] = 10_000));
    const history = await w.runPipeline(
      stubs,
      { runId: 'beats', config },
      async (h) => (await h.result(), h.fetchHistory()),
    );
    // Seconds of heartbeat timeout per activity type; the server writes 0 for none.
    const scheduled = new Map<string, Set<number>>();
    for (const e of history.events ?? []) {
      const a = e.activityTaskScheduledEventAttributes;
      if (!a) continue;
      const t = Number(a.heartbeatTimeout?.seconds ?? 0);
      scheduled.set(a.activityType!.name!, (scheduled.get(a.activityType!.name!) ?? new Set()).add(t));
    }
    const beating = [
      'launchServer',
      'awaitServerReady',
      'smokeTest',
      'acceptanceGate',
      'stopServer',
      'generateData',
      'extractHiddenStates',
      'trainDrafter',
      'benchmarkSweep',
      // GPU leases: waiting and renewing heartbeat like any long activity.
      'acquireGpuLease',
      'holdGpuLease',
    ];
    expect(Object.fromEntries([...scheduled].map(([k, v]) => [k, [...v]]))).toEqual({
      ...Object.fromEntries(beating.map((k) => [k, [10]])),
      // Measuring the destination walks the tree on the host: its own, longer allowance.
      checkExtractSpace: [120],
      ...Object.fromEntries(
        ['preflight', 'checkLedger', 'writeLedger', 'storedSweep', 'writeReport', 'releaseGpuLease'].map((k) => [
          k,
          [0],
        ]),
      ),
    });
  });
});
