/**
 * The generate pool's scaling, measured the way it runs: the real `pipeline` workflow (told to
 * stop after generate) on its own Temporal dev server, one `aerie worker` process, and 1, 2 and
 * 4 simulated SGLang servers on GPU subsets of one simulated host, in one run of this script.
 *
 *   npx tsx bench/generate-pool.ts [--samples 4000] [--concurrency 16] [--max-tokens 32]
 *                                  [--history-samples 100000] [--keep]
 *
 * Each server's capacity is the limit, not this machine: the simulator's latency model at
 * full scale (AERIE_SIM_DECODE_SCALE=1: ~6.3 ms per decode step, memory-bound, so a step costs
 * the same at batch 1 and at batch 16) and `concurrency` requests per server. A server then
 * does ~concurrency × 1000 / (6.3 × max-tokens) samples/s while the machine sleeps through the
 * steps, so the ratio against one server says what the pool adds. Throughput is over the batch
 * activities (first start to last completion; server launches not counted).
 *
 * Then the history of a --history-samples run on 4 servers at zero model delay (the run a
 * researcher would make of a 100k-sample set): its event count is what the workflow carries.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AERIE_HOME, parseConfigText } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import { HostPool } from '../src/hosts/index.js';
import { TASK_QUEUE, type PipelineInput, type PipelineResult } from '../src/shared.js';
import { freePort } from '../src/temporal/dev-server.js';
import { pipeline } from '../src/workflows/index.js';
import { activitySpan, spawnWorker, startTemporal, writeInput, type BenchTemporal } from './generate-common.js';

const { values } = parseArgs({
  options: {
    samples: { type: 'string', default: '4000' },
    concurrency: { type: 'string', default: '16' },
    'max-tokens': { type: 'string', default: '32' },
    'history-samples': { type: 'string', default: '100000' },
    keep: { type: 'boolean', default: false },
  },
});

async function poolConfig(workdir: string, input: string, servers: number, decodeScale: string): Promise<Config> {
  const config = parseConfigText(await readFile(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8'), 'demo.yaml');
  config.hosts.local!.workdir = workdir;
  const ports: number[] = [];
  for (let i = 0; i < servers; i++) ports.push(await freePort());
  config.server.port = ports[0]!;
  config.server.env = { AERIE_SIM_TIME_SCALE: '0.02', AERIE_SIM_DECODE_SCALE: decodeScale };
  const g = config.stages.generate;
  g.input = input;
  g.concurrency = Number(values.concurrency);
  g['max-tokens'] = Number(values['max-tokens']);
  // One server on the pool's path too: the ratio compares like with like.
  g.servers = ports.map((port, i) => ({ gpus: [i], port }));
  return config;
}

interface Measured {
  servers: number;
  samples: number;
  secs: number;
  batches: number;
  events: number;
}

async function measure(t: BenchTemporal, work: string, input: string, servers: number, decodeScale: string) {
  const workdir = join(work, `host-${servers}-${decodeScale}`);
  const config = await poolConfig(workdir, input, servers, decodeScale);
  const runId = `genpool-${servers}-${Date.now()}`;
  const args: [PipelineInput] = [{ runId, config, configPath: 'bench/generate-pool.ts', until: 'generate' }];
  const handle = await t.client.workflow.start(pipeline, { taskQueue: TASK_QUEUE, workflowId: runId, args });
  const hosts = new HostPool();
  try {
    const result = (await handle.result()) as PipelineResult;
    const generate = result.stages.find((s) => s.stage === 'generate');
    if (generate?.state !== 'done') throw new Error(`generate ${generate?.state}: ${generate?.note}`);
    const events = (await handle.fetchHistory()).events ?? [];
    const span = activitySpan(events, 'generatePoolBatch');
    const manifest = JSON.parse(await readFile(join(workdir, 'runs', runId, 'data', 'manifest.json'), 'utf8')) as {
      counts: { ok: number };
    };
    return {
      servers,
      samples: manifest.counts.ok,
      secs: (span.to - span.from) / 1000,
      batches: span.count,
      events: events.length,
    } satisfies Measured;
  } finally {
    const host = hosts.get(config);
    for (const r of await host.listLaunches()) await host.killGroup(r, { graceMs: 2000 }).catch(() => undefined);
    await hosts.closeAll();
  }
}

async function main(): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), 'aerie-genpool-'));
  const temporal = await startTemporal(join(work, 'temporal'));
  const worker = await spawnWorker(temporal.address, join(work, 'worker.log'));
  const input = join(work, 'input.jsonl');
  await writeInput(input, Number(values.samples));
  process.stdout.write(
    `worker: aerie worker (${worker.fromSource ? 'from source' : 'compiled'}); ${values.samples} samples, ` +
      `concurrency ${values.concurrency} per server, max-tokens ${values['max-tokens']}, AERIE_SIM_DECODE_SCALE=1\n\n`,
  );
  try {
    const rows: Measured[] = [];
    for (const servers of [1, 2, 4]) {
      rows.push(await measure(temporal, work, input, servers, '1'));
      const r = rows[rows.length - 1]!;
      process.stdout.write(
        `  ${servers} server(s): ${r.samples} samples in ${r.secs.toFixed(1)} s (${r.batches} batches)\n`,
      );
    }
    const one = rows[0]!.samples / rows[0]!.secs;
    process.stdout.write(
      '\n| servers | samples/s | × one server | batches | history events |\n|---|---|---|---|---|\n',
    );
    for (const r of rows) {
      const rate = r.samples / r.secs;
      process.stdout.write(
        `| ${r.servers} | ${rate.toFixed(0)} | ${(rate / one).toFixed(2)}× | ${r.batches} | ${r.events} |\n`,
      );
    }
    const n = Number(values['history-samples']);
    if (n > 0) {
      const big = join(work, 'big.jsonl');
      await writeInput(big, n);
      const r = await measure(temporal, work, big, 4, '0');
      process.stdout.write(
        `\n${n} samples on 4 servers at zero model delay: ${(r.samples / r.secs).toFixed(0)} samples/s, ` +
          `${r.batches} batches, ${r.events} history events (whole run: preflight, leases, 4 launches, plan, batches, merge)\n`,
      );
    }
  } finally {
    try {
      process.kill(-worker.pid, 'SIGKILL');
    } catch {
      // already gone
    }
    await temporal.stop();
    if (!values.keep) await rm(work, { recursive: true, force: true });
    else process.stdout.write(`kept ${work}\n`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`generate-pool: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
