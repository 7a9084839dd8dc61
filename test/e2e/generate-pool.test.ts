/**
 * The generate pool end to end: three simulated target servers on GPU subsets of one host, or
 * of two simulated hosts (their own workdirs, launch records and GPU leases) — the real
 * workflow, real workers, the simulator's servers as real process groups — against
 * a one-server reference run of the same input. One server is SIGKILLed mid-stage: its batch
 * goes back to the pool, the server is relaunched, and the outputs are the reference's byte
 * for byte, each id once. Then the worker itself is SIGKILLed mid-stage: another worker takes
 * the batches over after a heartbeat timeout, re-attaching to the live servers.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import type { ProcRecord } from '../../src/hosts/host.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { TASK_QUEUE, type PipelineResult } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { demoConfig } from '../support/demo-config.js';
import { signalGroup } from '../support/processes.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-genpool-', {
  setup: (work) => {
    process.env.AERIE_SIM_GPU_DIR = join(work, 'gpus');
  },
});
const OUTPUTS = ['train.jsonl', 'train_error.jsonl', 'train_skipped.jsonl', 'train_rejected.jsonl'];

/** `servers` on GPU subsets of the host; with `otherHost`, the last of them on a second simulated host. */
async function config(workdir: string, servers: number, otherHost = false): Promise<Config> {
  const ports: number[] = [];
  for (let i = 0; i < servers; i++) ports.push(await freePort());
  return demoConfig(workdir, ports[0]!, (c) => {
    c.run['heartbeat-timeout'] = 8000;
    c.stages.generate.concurrency = 4;
    // Slow enough that a kill lands mid-stage; the answers do not depend on it.
    c.server.env.AERIE_SIM_DECODE_SCALE = '0.4';
    if (servers > 1) {
      c.stages.generate.servers = ports.map((port, i) => ({ gpus: [i], port }));
      c.stages.generate['batch-size'] = 8;
    }
    if (otherHost) {
      // Its own workdir, launch records and lease; the same simulated GPU registry, so another GPU.
      c.hosts['gpu-b'] = { ...c.hosts.local!, workdir: `${workdir}-gpu-b` };
      c.stages.generate.servers![servers - 1]!.host = 'gpu-b';
    }
  });
}

function start(runId: string, cfg: Config) {
  return suite.t.client.workflow.start(pipeline, {
    taskQueue: TASK_QUEUE,
    workflowId: runId,
    args: [{ runId, config: cfg, configPath: 'test', until: 'generate' }],
  });
}

const dataDir = (workdir: string, runId: string) => join(workdir, 'runs', runId, 'data');
const outputs = async (dir: string) =>
  Promise.all(OUTPUTS.map((f) => readFile(join(dir, f), 'utf8').catch(() => `(no ${f})`)));

/** Batches with at least one shard on disk: the pool is under way. */
async function batchesStarted(dir: string): Promise<number> {
  const pool = join(dir, 'shards', 'pool');
  let n = 0;
  for (const b of await readdir(pool).catch(() => [] as string[])) {
    if (!b.startsWith('b-')) continue;
    if ((await readdir(join(pool, b)).catch(() => [] as string[])).some((f) => /^ok-\d+\.jsonl$/.test(f))) n++;
  }
  return n;
}

const record = async (workdir: string, launchId: string) =>
  JSON.parse(await readFile(join(workdir, '.aerie', 'procs', `${launchId}.json`), 'utf8')) as ProcRecord;
const launchIds = async (workdir: string, runId: string) =>
  (await readdir(join(workdir, '.aerie', 'procs')))
    .filter((f) => f.startsWith(`${runId}.server-generate`) && f.endsWith('.json'))
    .map((f) => f.slice(0, -'.json'.length))
    .sort();

let reference: string[] | undefined;
async function referenceOutputs(): Promise<string[]> {
  if (reference) return reference;
  const workdir = join(suite.work, 'ref');
  const runId = `pool-ref-${Date.now()}`;
  await suite.t.withWorker(async () => {
    const r = (await (await start(runId, await config(workdir, 1))).result()) as PipelineResult;
    expect(r.stages.find((s) => s.stage === 'generate')?.state).toBe('done');
  });
  reference = await outputs(dataDir(workdir, runId));
  expect(reference[0]!.split('\n').filter(Boolean)).toHaveLength(96);
  return reference;
}

function idsOnce(train: string): void {
  const ids = train
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { id: string }).id);
  expect(new Set(ids).size).toBe(ids.length);
}

describe('a pool of three generate servers', () => {
  it('on two hosts, loses one server mid-stage, relaunches it, and writes the one-server outputs byte for byte', async () => {
    const ref = await referenceOutputs();
    const workdir = join(suite.work, 'kill-server');
    const runId = `pool-kill-${Date.now()}`;
    const cfg = await config(workdir, 3, true);
    const result = await suite.t.withWorker(async () => {
      const h = await start(runId, cfg);
      await waitUntil(
        async () => (await batchesStarted(dataDir(workdir, runId))) >= 3,
        'three batches under way',
        120_000,
      );
      // The fault: server s1's recorded process group dies at once, requests in flight.
      const victim = await record(workdir, `${runId}.server-generate-s1.0`);
      signalGroup(victim.pgid, 'SIGKILL');
      return (await h.result()) as PipelineResult;
    });
    const generate = result.stages.find((s) => s.stage === 'generate')!;
    expect(generate.state).toBe('done');
    expect(generate.note).toMatch(/ on 3 servers$/);
    const got = await outputs(dataDir(workdir, runId));
    expect(got).toEqual(ref);
    idsOnce(got[0]!);
    const history = await suite.t.client.workflow.getHandle(runId).fetchHistory();
    // s1 was launched again; the others once each.
    expect(await launchIds(workdir, runId)).toEqual([
      `${runId}.server-generate-s0.0`,
      `${runId}.server-generate-s1.0`,
      `${runId}.server-generate-s1.1`,
    ]);
    // The server on the second host logged and recorded there, and held that host's lease.
    expect(await launchIds(`${workdir}-gpu-b`, runId)).toEqual([`${runId}.server-generate-s2.0`]);
    const leases = (history.events ?? [])
      .map((e) => e.activityTaskScheduledEventAttributes)
      .filter((a) => a?.activityType?.name === 'acquireGpuLease').length;
    expect(leases).toBe(2);
    const failed = (history.events ?? []).filter((e) => e.activityTaskFailedEventAttributes);
    expect(failed.length).toBeGreaterThanOrEqual(1);
  }, 420_000);

  it('loses its worker mid-stage: another worker takes the batches over and the outputs are the same', async () => {
    const ref = await referenceOutputs();
    const workdir = join(suite.work, 'kill-worker');
    const runId = `pool-worker-${Date.now()}`;
    const h = await start(runId, await config(workdir, 3));
    await suite.startWorkerProcess('pool-worker-1');
    await waitUntil(
      async () => (await batchesStarted(dataDir(workdir, runId))) >= 3,
      'three batches under way',
      120_000,
    );
    suite.killWorkerProcess('pool-worker-1');
    await suite.startWorkerProcess('pool-worker-2');
    const result = (await h.result()) as PipelineResult;
    expect(result.stages.find((s) => s.stage === 'generate')?.state).toBe('done');
    const got = await outputs(dataDir(workdir, runId));
    expect(got).toEqual(ref);
    idsOnce(got[0]!);
    // The servers outlived the worker and were re-attached, not launched again.
    expect(await launchIds(workdir, runId)).toEqual([0, 1, 2].map((i) => `${runId}.server-generate-s${i}.0`));
  }, 420_000);
});
