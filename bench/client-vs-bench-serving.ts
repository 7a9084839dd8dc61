/**
 * aerie's load generator against real `sglang.bench_serving` 0.5.4 (the venv
 * scripts/setup-sglang-client.sh makes), side by side in one run, on the same simulator at
 * zero model delay (AERIE_SIM_DECODE_SCALE=0), at the same levels, with the same prompts:
 *
 *   npx tsx bench/client-vs-bench-serving.ts [--levels 1,64,250] [--output-len 256] [--input-len 48] [--rounds 4] [--c1-requests 200]
 *
 * Each client runs as its own child process per level, so CPU and peak RSS are that client's:
 *   - achieved concurrency: Σ client E2E / (first measured send → last measured completion),
 *     i.e. the mean number of requests in flight over the level;
 *   - client overhead: client E2E − the server's meta_info.e2e_latency, per request, p50/p99
 *     (src/bench/metrics.ts distribution() for both, so the percentiles are defined alike);
 *   - CPU per output token: user+sys of the client process from its first measured request
 *     to its last completion (warmup and start-up excluded), over the level's output tokens;
 *   - peak RSS: the client process's VmHWM at exit (start-up, tokenizer, runtime included).
 * bench_serving runs unmodified under a small Python wrapper (BENCH_SERVING_WRAPPER) that
 * records, per request, its own `latency` and the server's e2e_latency from the frames it
 * parses; that wrapper's cost falls on bench_serving's side (see the .md).
 * Exit code 1 when a client failed a request.
 *
 * This file is the command line and the run over the levels; client-vs-bench-serving/ holds the
 * client children (children.ts, which this same script runs in child mode), the bench_serving
 * wrapper (wrapper.ts) and the figures and report (figures.ts).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchServingArgv, shareGptDataset } from '../src/bench/bench-serving.js';
import { randomPrompts } from '../src/bench/prompts.js';
import { aerieChild, referenceChild, runChild, WARMUP, type ChildResult } from './client-vs-bench-serving/children.js';
import { figures, report, type Figures, type Row } from './client-vs-bench-serving/figures.js';
import { BENCH_SERVING_WRAPPER } from './client-vs-bench-serving/wrapper.js';
import { SIM_MODEL, SimServer } from './sim-process.js';

const SELF = fileURLToPath(import.meta.url);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const PYTHON = join(REPO, '.venv-sglang-bench', 'bin', 'python');
const OFFLINE_ENV = { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', HF_HUB_DISABLE_TELEMETRY: '1' };
const SEED = 7;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      levels: { type: 'string', default: '1,64,250' },
      'output-len': { type: 'string', default: '256' },
      'input-len': { type: 'string', default: '48' },
      rounds: { type: 'string', default: '4' },
      'c1-requests': { type: 'string', default: '200' },
      // Child mode (internal).
      'aerie-child': { type: 'boolean', default: false },
      'reference-child': { type: 'boolean', default: false },
      port: { type: 'string' },
      url: { type: 'string' },
      dataset: { type: 'string' },
      concurrency: { type: 'string' },
      result: { type: 'string' },
    },
  });
  const outputLen = Number(values['output-len']);
  if (values['aerie-child']) {
    return aerieChild({
      url: values.url!,
      dataset: values.dataset!,
      concurrency: Number(values.concurrency),
      outputLen,
      result: values.result!,
    });
  }
  if (values['reference-child']) {
    return referenceChild({
      port: Number(values.port),
      dataset: values.dataset!,
      concurrency: Number(values.concurrency),
      outputLen,
      result: values.result!,
    });
  }
  if (!existsSync(join(REPO, '.venv-sglang-bench', '.aerie-pins')))
    throw new Error('.venv-sglang-bench is missing: run `bash scripts/setup-sglang-client.sh`');
  const levels = values.levels!.split(',').map(Number);
  const inputLen = Number(values['input-len']);
  const rounds = Number(values.rounds);
  const dir = mkdtempSync(join(tmpdir(), 'aerie-client-vs-bs-'));
  const wrapper = join(dir, 'bench_serving_recorded.py');
  writeFileSync(wrapper, BENCH_SERVING_WRAPPER);
  const maxC = Math.max(...levels);
  // No radix cache: the second client at a level must not find the first one's prefixes cached.
  const sim = await SimServer.start({
    decodeScale: 0,
    args: ['--max-running-requests', String(maxC), '--disable-radix-cache'],
  });
  const rowsOut: Row[] = [];
  let failed = false;
  try {
    for (const [li, c] of levels.entries()) {
      const n = c === 1 ? Number(values['c1-requests']) : c * rounds;
      const dataset = join(dir, `c${c}.dataset.json`);
      writeFileSync(dataset, shareGptDataset(randomPrompts(n, inputLen, SEED + c)));
      const runAerie = async (): Promise<Figures> => {
        const result = join(dir, `c${c}.aerie.json`);
        const res = await runChild(
          [
            process.execPath,
            '--import',
            'tsx',
            SELF,
            '--aerie-child',
            '--url',
            sim.baseUrl,
            '--dataset',
            dataset,
            '--concurrency',
            String(c),
            '--output-len',
            String(outputLen),
            '--result',
            result,
          ],
          {},
        );
        if (res.code !== 0 || !existsSync(result))
          throw new Error(`aerie child at C=${c} exited ${res.code}:\n${res.log}`);
        return figures(JSON.parse(readFileSync(result, 'utf8')) as ChildResult);
      };
      const runRef = async (): Promise<Figures> => {
        const result = join(dir, `c${c}.ref.json`);
        const res = await runChild(
          [
            process.execPath,
            '--import',
            'tsx',
            SELF,
            '--reference-child',
            '--port',
            String(sim.port),
            '--dataset',
            dataset,
            '--concurrency',
            String(c),
            '--output-len',
            String(outputLen),
            '--result',
            result,
          ],
          {},
        );
        if (res.code !== 0 || !existsSync(result))
          throw new Error(`reference child at C=${c} exited ${res.code}:\n${res.log}`);
        return figures(JSON.parse(readFileSync(result, 'utf8')) as ChildResult);
      };
      const runBs = async (): Promise<Figures> => {
        const result = join(dir, `c${c}.bs.json`);
        const argv = benchServingArgv({
          launcher: [PYTHON, wrapper],
          api: 'generate',
          host: '127.0.0.1',
          port: sim.port,
          concurrency: c,
          numPrompts: n,
          outputLen,
          inputLen,
          datasetName: 'sharegpt',
          datasetPath: dataset,
          outputFile: join(dir, `c${c}.bs.jsonl`),
          warmup: WARMUP,
          seed: SEED,
          model: SIM_MODEL,
          extraArgs: [],
        });
        const res = await runChild(argv, {
          ...OFFLINE_ENV,
          AERIE_BENCH_RESULT: result,
          AERIE_BENCH_WARMUP: String(WARMUP),
        });
        if (res.code !== 0 || !existsSync(result))
          throw new Error(`bench_serving at C=${c} exited ${res.code}:\n${res.log}`);
        return figures(JSON.parse(readFileSync(result, 'utf8')) as ChildResult);
      };
      // Alternate who goes first, so neither always meets a freshly idle server.
      const aerieFirst = li % 2 === 0;
      let aerie: Figures;
      let bs: Figures;
      if (aerieFirst) {
        aerie = await runAerie();
        bs = await runBs();
      } else {
        bs = await runBs();
        aerie = await runAerie();
      }
      // The floor last: it is context for the overhead figures, not one of the compared clients.
      const ref = await runRef();
      rowsOut.push({
        c,
        n,
        aerie,
        bs,
        ref,
        order: aerieFirst ? 'aerie, bench_serving, reference' : 'bench_serving, aerie, reference',
      });
      if (aerie.failed > 0 || bs.failed > 0) failed = true;
    }
  } finally {
    await sim.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(report(rowsOut, outputLen, inputLen));
  process.exit(failed ? 1 : 0);
}

await main();
