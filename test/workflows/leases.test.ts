/**
 * GPU leases across runs, in seconds: the real lease workflow (src/workflows/gpu-lease.ts) and
 * the real lease activities (src/activities/leases.ts) beside stub stage activities, on one
 * Worker of @temporalio/testing's local environment. Two pipelines on one host: the second
 * waits until the first gives its GPUs back; a holder whose renewals stop loses them after its
 * TTL; a cancelled run gives them back at once; the lease workflow keeps its table across
 * continue-as-new.
 */
import { Context } from '@temporalio/activity';
import { afterAll, describe, expect, it } from 'vitest';
import type { Activities } from '../../src/activities/index.js';
import { leaseActivities, type LeaseActivities } from '../../src/activities/leases.js';
import type { Config } from '../../src/config/schema.js';
import { HostPool } from '../../src/hosts/index.js';
import { leaseWorkflowId, type LeaseSnapshot } from '../../src/leases/protocol.js';
import {
  gpuLease,
  leaseRenewSignal,
  leaseRequestSignal,
  leasesQuery,
  pipeline,
  statusQuery,
} from '../../src/workflows/index.js';
import { demoConfig } from '../support/demo-config.js';
import { StubActivities, untilCancelled } from '../support/stub-activities.js';
import { waitUntil } from '../support/temporal.js';
import { useWorkflowEnv } from '../support/workflow-env.js';

const w = useWorkflowEnv();
const hosts = new HostPool();

afterAll(async () => {
  await hosts.closeAll();
});

const ALL8 = ['0', '1', '2', '3', '4', '5', '6', '7'];

/** A host of its own per test (leases are per host name), eight GPUs named in config, and a short TTL. */
function config(host: string, ttlMs: number): Config {
  return demoConfig('/stub/work', 30000, (c) => {
    c.hosts[host] = { ...c.hosts.local!, gpus: [0, 1, 2, 3, 4, 5, 6, 7] };
    c.target.host = host;
    c.run['lease-ttl'] = ttlMs;
  });
}

/**
 * One worker on a fresh queue for the pipelines and the lease workflows alike; `log` gets a
 * line per lease call and per preflight, in the order they happened across both runs.
 */
async function withLeaseWorker<T>(
  stubs: StubActivities,
  fn: (taskQueue: string, log: string[]) => Promise<T>,
  leases?: (real: LeaseActivities) => LeaseActivities,
): Promise<T> {
  const log: string[] = [];
  // The lease activities signal the lease workflows onto the worker's own queue: built once it is known.
  const activities = (taskQueue: string) => {
    const real = leaseActivities({ hosts, leaseTaskQueue: taskQueue });
    const used = leases ? leases(real) : real;
    const logged = Object.fromEntries(
      Object.entries(used).map(([name, f]) => [
        name,
        async (input: never) => {
          const wf = Context.current().info.workflowExecution!.workflowId;
          log.push(`${name} ${wf}`);
          const out = await (f as (i: never) => Promise<unknown>)(input);
          log.push(`${name} ${wf} done`);
          return out;
        },
      ]),
    ) as unknown as LeaseActivities;
    stubs.leases = logged;
    return stubs.activities() as Activities & LeaseActivities;
  };
  stubs.on('preflight', ({ runId }) => {
    log.push(`preflight ${runId}`);
    return { note: 'stub host reachable', checks: [], specforge: 'cli', sglang: { version: '0.5.23', how: 'stub' } };
  });
  return w.withWorker(activities, (taskQueue) => fn(taskQueue, log));
}

const start = (taskQueue: string, runId: string, cfg: Config) =>
  w.env.client.workflow.start(pipeline, {
    taskQueue,
    workflowId: runId,
    args: [{ runId, config: cfg, configPath: 'test' }],
  });

const leases = (host: string) => w.env.client.workflow.getHandle(leaseWorkflowId(host)).query(leasesQuery);
const runsOf = (entries: LeaseSnapshot['holders']) => entries.map((e) => e.holder.runId);

/** A generateData that runs until the test opens it (or the run is cancelled). */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  let entered = 0;
  return {
    open,
    entered: () => entered,
    async generate(runId: string, wanted: string) {
      if (runId !== wanted) return undefined;
      entered++;
      await Promise.race([opened, untilCancelled()]);
      return undefined;
    },
  };
}

describe('GPU leases between pipelines on one host', () => {
  it('makes the second run wait, launching nothing, until the first gives the GPUs back; then it completes', async () => {
    const host = 'lease-fifo';
    const cfg = config(host, 60_000);
    const stubs = new StubActivities();
    const g = gate();
    const defaultGenerate = { dataPath: '/stub/data/train.jsonl', counts: { samples: 4 }, outputs: [], note: '4' };
    stubs.on('generateData', async ({ runId }) => (await g.generate(runId, 'fifo-a'), defaultGenerate));
    await withLeaseWorker(stubs, async (q, log) => {
      const a = await start(q, 'fifo-a', cfg);
      await waitUntil(async () => g.entered() > 0, 'run A in generate', 30_000, 50);
      const b = await start(q, 'fifo-b', cfg);
      const waiting = await waitUntil(
        async () => {
          const s = await leases(host);
          return s.waiters.length > 0 && s;
        },
        'run B queued',
        30_000,
        50,
      );
      expect(runsOf(waiting.holders)).toEqual(['fifo-a']);
      expect(runsOf(waiting.waiters)).toEqual(['fifo-b']);
      expect(waiting.holders[0]!.gpus).toEqual(ALL8);
      expect(stubs.calls.filter((c) => c.input.runId === 'fifo-b')).toEqual([]);
      // The board says what B waits for.
      const board = await b.query(statusQuery);
      expect(board.stages.find((s) => s.stage === 'preflight')?.note).toBe(`waiting for a lease on ${host}'s GPUs`);

      g.open();
      await a.result();
      await b.result();
      // B's first step on the host came after A had given its GPUs back.
      const released = log.indexOf('releaseGpuLease fifo-a done');
      expect(released).toBeGreaterThan(-1);
      expect(log.indexOf('preflight fifo-b')).toBeGreaterThan(released);
      expect(log.filter((l) => l.startsWith('acquireGpuLease fifo-b done'))).toHaveLength(1);
      // Nobody holds or waits: the lease workflow has ended.
      const lease = w.env.client.workflow.getHandle(leaseWorkflowId(host));
      await waitUntil(
        async () => (await lease.describe()).status.name === 'COMPLETED',
        'the lease workflow to end',
        10_000,
        50,
      );
    });
  }, 90_000);

  it('takes the GPUs from a holder that stops renewing, once its TTL has passed, and gives them to the next run', async () => {
    const host = 'lease-ttl';
    const cfg = config(host, 1500);
    const stubs = new StubActivities();
    const g = gate();
    const defaultGenerate = { dataPath: '/stub/data/train.jsonl', counts: { samples: 4 }, outputs: [], note: '4' };
    stubs.on('generateData', async ({ runId }) => (await g.generate(runId, 'silent-a'), defaultGenerate));
    // Run A's renewals never reach the lease workflow: as if its worker had died after the grant.
    const silentHold = (real: LeaseActivities): LeaseActivities => ({
      ...real,
      holdGpuLease: (input) =>
        Context.current().info.workflowExecution!.workflowId === 'silent-a'
          ? untilCancelled()
          : real.holdGpuLease(input),
    });
    await withLeaseWorker(
      stubs,
      async (q) => {
        const a = await start(q, 'silent-a', cfg);
        await waitUntil(async () => g.entered() > 0, 'run A in generate', 30_000, 50);
        const t0 = Date.now();
        const b = await start(q, 'silent-b', cfg);
        const result = await b.result();
        expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
        expect(result.stages.every((s) => s.state === 'done')).toBe(true);
        expect(result.stages.find((s) => s.stage === 'preflight')?.note).toBe('stub host reachable');
        // A is still in generate, but its lease is gone and recorded as expired while held.
        expect(g.entered()).toBe(1);
        const snap = await leases(host);
        expect(runsOf(snap.holders)).toEqual([]);
        expect(snap.expired.map((e) => [e.holder.runId, e.held])).toEqual([['silent-a', true]]);
        await a.cancel();
        await a.result().catch(() => undefined);
      },
      silentHold,
    );
  }, 90_000);

  it('gives the GPUs back when a holding run is cancelled, and drops a cancelled waiter from the queue', async () => {
    const host = 'lease-cancel';
    const cfg = config(host, 60_000);
    const stubs = new StubActivities();
    const g = gate();
    stubs.on('generateData', async ({ runId }) => {
      await g.generate(runId, 'cancel-a');
      return { dataPath: '/stub/data/train.jsonl', counts: { samples: 4 }, outputs: [], note: '4' };
    });
    await withLeaseWorker(stubs, async (q, log) => {
      const a = await start(q, 'cancel-a', cfg);
      await waitUntil(async () => g.entered() > 0, 'run A in generate', 30_000, 50);
      const b = await start(q, 'cancel-b', cfg);
      const c = await start(q, 'cancel-c', cfg);
      await waitUntil(async () => (await leases(host)).waiters.length === 2, 'B and C queued', 30_000, 50);
      await b.cancel();
      await waitUntil(
        async () => runsOf((await leases(host)).waiters).join() === 'cancel-c',
        'B out of the queue',
        30_000,
        50,
      );
      await a.cancel();
      await c.result();
      expect(log).toContain('releaseGpuLease cancel-a done');
      expect(log.filter((l) => l.startsWith('preflight'))).toEqual(['preflight cancel-a', 'preflight cancel-c']);
    });
  }, 90_000);
});

describe('the lease workflow', () => {
  it('continues as new with its table: holders and waiters survive', async () => {
    const host = 'lease-can';
    // A workflow-only worker: the test signals the lease workflow itself.
    await w.withWorker({}, async (taskQueue) => {
      const holder = (run: string) => ({ workflowId: run, execution: 'x', runId: run });
      const h = await w.env.client.workflow.start(gpuLease, {
        taskQueue,
        workflowId: leaseWorkflowId(host),
        args: [{ host, continueAfterEvents: 12 }],
      });
      const first = h.firstExecutionRunId;
      await h.signal(leaseRequestSignal, { holder: holder('a'), gpus: ['0'], ttlMs: 60_000 });
      await h.signal(leaseRequestSignal, { holder: holder('b'), gpus: ['0'], ttlMs: 60_000 });
      for (let i = 0; i < 20; i++) await h.signal(leaseRenewSignal, holder('a'));
      const latest = w.env.client.workflow.getHandle(leaseWorkflowId(host));
      await waitUntil(async () => (await latest.describe()).runId !== first, 'a continue-as-new', 30_000, 50);
      const snap = await latest.query(leasesQuery);
      expect(runsOf(snap.holders)).toEqual(['a']);
      expect(runsOf(snap.waiters)).toEqual(['b']);
      await latest.terminate('test done');
    });
  }, 60_000);
});
