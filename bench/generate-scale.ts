/**
 * The generate stage at scale, measured the way it runs: the real `pipeline` workflow on a
 * Temporal dev server, a real `aerie worker` process, the simulated SGLang server at zero
 * model delay. The workflow is cancelled once the generate stage has recorded its ledger
 * entry (the later stages are not what is measured).
 *
 *   npx tsx bench/generate-scale.ts [--samples 100000] [--concurrency 256] [--max-tokens 16] [--from-source] [--trace] [--keep]
 *
 * The worker is `aerie worker` as a researcher runs it: compiled from dist/ with the prebuilt
 * workflow bundle when the build is current (`npm run build`, which set-up runs), or with
 * --from-source through tsx, bundling the workflow code with webpack when it starts.
 *
 * Prints throughput (samples/s over the generateData activity), the worker's peak RSS while
 * the stage ran (sampled from /proc every 100 ms) and its lifetime high-water mark (VmHWM,
 * which includes start-up), and the number of events in the workflow's history.
 */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AERIE_HOME, parseConfigText } from '../src/config/load.js';
import { HostPool } from '../src/hosts/index.js';
import { TASK_QUEUE, type PipelineInput } from '../src/shared.js';
import { pipeline } from '../src/workflows/index.js';
import { freePort } from '../src/temporal/dev-server.js';
import { activitySpan, spawnWorker, startTemporal, waitFor, writeInput } from './generate-common.js';

const { values } = parseArgs({
  options: {
    samples: { type: 'string', default: '100000' },
    concurrency: { type: 'string', default: '256' },
    'max-tokens': { type: 'string', default: '16' },
    keep: { type: 'boolean', default: false },
    'from-source': { type: 'boolean', default: false },
    'node-flags': { type: 'string', default: '' },
    trace: { type: 'boolean', default: false },
  },
});
const SAMPLES = Number(values.samples);
const CONCURRENCY = Number(values.concurrency);

async function procKb(pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

async function main(): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), 'aerie-genscale-'));
  const stateDir = join(work, 'temporal');
  const input = join(work, 'input.jsonl');
  const inputBytes = await writeInput(input, SAMPLES);
  process.stdout.write(`input: ${SAMPLES} samples, ${(inputBytes / 2 ** 20).toFixed(1)} MiB (${input})\n`);

  const temporal = await startTemporal(stateDir);
  const client = temporal.client;

  const workdir = join(work, 'host');
  const config = parseConfigText(await readFile(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8'), 'demo.yaml');
  config.hosts.local!.workdir = workdir;
  config.server.port = await freePort();
  config.server.env = { AERIE_SIM_TIME_SCALE: '0.02', AERIE_SIM_DECODE_SCALE: '0' };
  config.stages.generate.input = input;
  config.stages.generate.concurrency = CONCURRENCY;
  config.stages.generate['max-tokens'] = Number(values['max-tokens']);
  if (config.stages.extract.driver === 'patched-server') config.stages.extract['dump-dir'] = join(workdir, 'shm');

  const { pid: workerPid, fromSource } = await spawnWorker(temporal.address, join(work, 'worker.log'), {
    fromSource: values['from-source'],
    nodeFlags: values['node-flags'].split(' ').filter(Boolean),
  });
  process.stdout.write(
    `worker: aerie worker ${fromSource ? 'from source through tsx (workflow code bundled at start-up)' : 'compiled, dist/ with the prebuilt workflow bundle'}\n`,
  );
  const hosts = new HostPool();
  let peakKb = 0;
  let sampling = false;
  let ticks = 0;
  const sampler = setInterval(() => {
    if (!sampling) return;
    void procKb(workerPid, 'VmRSS').then((kb) => {
      peakKb = Math.max(peakKb, kb);
      if (values.trace && ++ticks % 20 === 0)
        process.stdout.write(`  ${new Date().toISOString().slice(11, 19)} worker RSS ${(kb / 1024).toFixed(0)} MB\n`);
    });
  }, 100);
  try {
    const runId = `genscale-${Date.now()}`;
    const args: [PipelineInput] = [{ runId, config, configPath: 'bench/generate-scale.ts' }];
    const handle = await client.workflow.start(pipeline, { taskQueue: TASK_QUEUE, workflowId: runId, args });
    const ledger = join(workdir, 'runs', runId, '.aerie', 'ledger', 'generate.json');
    const started = await waitFor(
      'the generate activity to start',
      async () => {
        const d = await handle.describe();
        if (d.status.name !== 'RUNNING')
          throw new Error(`workflow ended ${d.status.name} before generate (see ${work}/worker.log)`);
        const raw = d.raw.pendingActivities ?? [];
        return raw.some((a) => a.activityType?.name === 'generateData') ? true : undefined;
      },
      300_000,
    );
    void started;
    const baselineKb = await procKb(workerPid, 'VmRSS');
    sampling = true;
    await waitFor(
      'the generate stage to finish',
      async () => {
        if (await stat(ledger).catch(() => null)) return true;
        const d = await handle.describe();
        if (d.status.name !== 'RUNNING')
          throw new Error(`workflow ended ${d.status.name} during generate (see ${work}/worker.log)`);
        return undefined;
      },
      6 * 3600_000,
    );
    sampling = false;
    const hwmKb = await procKb(workerPid, 'VmHWM');
    await handle.cancel();
    await handle.result().catch(() => undefined);

    const history = await handle.fetchHistory();
    const events = history.events ?? [];
    const { from: t0, to: t1 } = activitySpan(events, 'generateData');
    const manifest = JSON.parse(await readFile(join(workdir, 'runs', runId, 'data', 'manifest.json'), 'utf8')) as {
      counts: Record<string, number>;
    };
    const secs = (t1 - t0) / 1000;
    const mb = (kb: number) => (kb / 1024).toFixed(0);
    process.stdout.write(
      [
        `generate: ${JSON.stringify(manifest.counts)}`,
        `concurrency ${CONCURRENCY}, max-tokens ${values['max-tokens']}, AERIE_SIM_DECODE_SCALE=0`,
        `generateData activity: ${secs.toFixed(1)} s → ${(SAMPLES / secs).toFixed(0)} samples/s`,
        `worker RSS: ${mb(baselineKb)} MB when the stage started, peak ${mb(peakKb)} MB during the stage; VmHWM ${mb(hwmKb)} MB (whole life, start-up included)`,
        `workflow history: ${events.length} events (whole run, through the cancel)`,
        '',
      ].join('\n'),
    );
  } finally {
    clearInterval(sampler);
    try {
      process.kill(-workerPid, 'SIGKILL');
    } catch {
      // already gone
    }
    // Anything the worker launched and did not stop (the cancel stops servers; this is the backstop).
    const host = hosts.get(config);
    for (const r of await host.listLaunches()) await host.killGroup(r, { graceMs: 2000 }).catch(() => undefined);
    await hosts.closeAll();
    await temporal.stop();
    if (!values.keep) await rm(work, { recursive: true, force: true });
    else process.stdout.write(`kept ${work}\n`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`generate-scale: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
