/**
 * Real `python -m sglang.bench_serving` (PyPI sglang==0.5.4, scripts/setup-sglang-client.sh)
 * against the simulator on loopback, through aerie's own `driver: bench-serving` code: the
 * functions the benchmark stage calls (src/activities/benchmark.ts measureFor →
 * benchServingDriver, then hostLevelStore and results.jsonl). Then aerie's own load generator
 * (aerieDriver, the stage's default driver) at the same level against the same simulator, and
 * the two compared. bench_serving is the judge of its own JSONL: every key it wrote must reach
 * what aerie stores and reports, with the value it wrote.
 */
import { readFileSync } from 'node:fs';
import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { benchServingBackend, benchServingDriver, benchServingHost } from '../../src/bench/bench-serving.js';
import { benchServingDatasetName, levelPrompts, type PromptPool } from '../../src/bench/dataset.js';
import { parseJsonLine, parseJsonLines } from '../../src/bench/python-json.js';
import type { BenchServingRecord } from '../../src/bench/metrics.js';
import { randomPrompts } from '../../src/bench/prompts.js';
import { renderResultsJsonl } from '../../src/bench/report-files.js';
import { aerieDriver, hostLevelStore } from '../../src/bench/sweep.js';
import { avgSpecAcceptLength, SglangClient } from '../../src/sglang/client.js';
import { useLocalHost } from '../support/local-host.js';
import { startSim, stopSim, type Sim } from '../support/sim.js';
import { OFFLINE_ENV, SIM_DRAFT_CONFIG, SIM_TARGET, sglangBenchPython } from './sglang-client.js';

// One level, small enough for < 60 s on a busy 2-core machine, large enough that each
// client's figures average over 6 closed-loop rounds.
const CONCURRENCY = 4;
const PROMPTS = 24;
const OUTPUT_LEN = 64;
const INPUT_WORDS = 48;
const SEED = 7;

const fx = useLocalHost('aerie-sglang-bench-', { sub: 'host' });
let dir: string;
let sim: Sim | undefined;
let port: number;
let rawLine: Record<string, unknown>;
let ingested: BenchServingRecord;
let benchLog: string;
let ours: BenchServingRecord;

beforeAll(async () => {
  const python = sglangBenchPython();
  Object.assign(process.env, OFFLINE_ENV); // this file's worker only; bench_serving inherits it
  dir = fx.dir;
  const draft = join(dir, 'draft');
  await mkdir(draft);
  await copyFile(SIM_DRAFT_CONFIG, join(draft, 'config.json'));
  // Real decode cost (decode scale 1: ~10 ms per speculative step at batch 4) so the figures are
  // the server's, not the clients' overheads; no radix cache, so neither client's warmup request
  // leaves a cached prefix that the other's first measured request would not find.
  sim = await startSim({ AERIE_SIM_DECODE_SCALE: '1' }, [
    '--speculative-algorithm',
    'EAGLE3',
    '--speculative-draft-model-path',
    draft,
    '--disable-radix-cache',
  ]);
  port = Number(new URL(sim.baseUrl).port);
  const { host } = fx;
  const client = new SglangClient(sim.baseUrl, { timeoutMs: 30_000 });
  // A conversations pool (dataset: file), so both clients send the very same prompt texts:
  // with dataset random, bench_serving re-cuts the prompts to --random-input-len tokens itself.
  const pool: PromptPool = { kind: 'file', prompts: randomPrompts(PROMPTS, INPUT_WORDS, SEED), source: 'test' };
  const prompts = levelPrompts(pool, PROMPTS, INPUT_WORDS, SEED + CONCURRENCY);

  // As measureFor builds it for driver bench-serving, with the venv's python as the launcher.
  const measureBench = benchServingDriver({
    host,
    dir: join(dir, 'bench'),
    variant: 'eagle3',
    control: client,
    timeoutMs: 50_000,
    level: {
      launcher: [python, '-m', 'sglang.bench_serving'],
      api: 'generate',
      host: benchServingHost('127.0.0.1'),
      port,
      outputLen: OUTPUT_LEN,
      inputLen: INPUT_WORDS,
      datasetName: benchServingDatasetName(pool.kind),
      warmup: 1,
      seed: SEED,
      model: SIM_TARGET,
      extraArgs: [],
    },
  });
  ingested = await measureBench({ concurrency: CONCURRENCY, prompts, onProgress: () => undefined });
  const stem = join(dir, 'bench', 'bench_serving', `eagle3-c${CONCURRENCY}-r0`); // round 0: the driver names each round's file
  const lines = readFileSync(`${stem}.jsonl`, 'utf8')
    .split('\n')
    .filter((l) => l.trim());
  expect(lines, 'bench_serving appends one line per run').toHaveLength(1);
  rawLine = parseJsonLine(lines[0]!) as Record<string, unknown>;
  benchLog = readFileSync(`${stem}.log`, 'utf8');

  // As measureFor builds it for driver aerie, variant eagle3.
  const measureOurs = aerieDriver({
    baseUrl: sim.baseUrl,
    api: 'generate',
    outputLen: OUTPUT_LEN,
    warmup: 1,
    model: SIM_TARGET,
    control: client,
    acceptLengthFrom: avgSpecAcceptLength,
    meta: {
      backend: benchServingBackend('generate'),
      datasetName: benchServingDatasetName(pool.kind),
      randomInputLen: INPUT_WORDS,
      randomOutputLen: OUTPUT_LEN,
      sharegptOutputLen: OUTPUT_LEN,
    },
  });
  ours = await measureOurs({ concurrency: CONCURRENCY, prompts, onProgress: () => undefined });
}, 110_000);

afterAll(async () => {
  if (sim) await stopSim(sim);
});

/** Keys bench_serving 0.5.4 writes that aerie's ingest does not keep: none since its input split is kept. */
const DROPPED_BY_INGEST_054: string[] = [];

describe('real sglang.bench_serving 0.5.4 through driver: bench-serving', () => {
  it('ran cleanly: every request completed, from the local tokenizer, without torch', () => {
    expect(rawLine.completed, benchLog).toBe(PROMPTS);
    expect(ingested.errors).toBe(0);
    expect(rawLine.backend).toBe('sglang');
    expect(rawLine.dataset_name).toBe('sharegpt');
    expect(rawLine.max_concurrency).toBe(CONCURRENCY);
    expect(rawLine.request_rate).toBe(Infinity);
    expect(rawLine.total_output_tokens).toBe(PROMPTS * OUTPUT_LEN);
    expect(benchLog).not.toMatch(/Traceback|huggingface\.co/);
  });

  it('keeps every key bench_serving wrote, with its value, in the stored level and in results.jsonl', async () => {
    const rawKeys = Object.keys(rawLine);
    // Stored as the stage stores it, read back, and written to results.jsonl after the
    // workflow's JSON round trip (where Infinity becomes null and the report restores it).
    const host = fx.hostAt('host');
    const store = hostLevelStore(host, join(dir, 'levels-store'), 'eagle3', 'k');
    await store.write(CONCURRENCY, ingested);
    const stored = (await store.read(CONCURRENCY))!;
    const viaWorkflow = JSON.parse(JSON.stringify(stored)) as BenchServingRecord;
    const reported = parseJsonLines(renderResultsJsonl({ speculative: [viaWorkflow] }))[0] as Record<string, unknown>;

    for (const [name, kept] of [
      ['ingested', ingested],
      ['stored', stored],
      ['results.jsonl', reported],
    ] as const) {
      const rec = kept as unknown as Record<string, unknown>;
      const missing = rawKeys.filter((k) => !(k in rec));
      // 0.5.4's input split (sglang==0.5.4:sglang/bench_serving.py:2004-2005) was dropped until
      // BENCH_SERVING_KEYS named total_input_text_tokens and total_input_vision_tokens.
      expect(missing, `${name}: keys bench_serving wrote that aerie lost`).toEqual(DROPPED_BY_INGEST_054);
      for (const k of rawKeys) {
        if (DROPPED_BY_INGEST_054.includes(k)) continue;
        expect(rec[k], `${name}.${k}`).toEqual(rawLine[k]);
      }
    }
  });

  it("keeps the p90s and p95s bench_serving wrote (0.5.4 writes p95_itl_ms only) and leaves aerie's own p90s null", () => {
    const pKeys = Object.keys(rawLine).filter((k) => /^p9[05]_/.test(k));
    expect(pKeys).toEqual(['p95_itl_ms']);
    const rec = ingested as unknown as Record<string, unknown>;
    for (const k of pKeys) expect(rec[k], k).toBe(rawLine[k]);
    // bench_serving 0.5.4 has no p90s to give; aerie's nearest-rank p90 names stay null rather
    // than being filled with something computed differently (S3).
    for (const k of ['p90_e2e_latency_ms', 'p90_ttft_ms', 'p90_tpot_ms', 'p90_itl_ms']) expect(rec[k], k).toBeNull();
  });
});

describe("aerie's load generator and bench_serving at the same level, same simulator", () => {
  const report = (): string =>
    JSON.stringify({
      bench_serving: pick(ingested),
      aerie: { ...pick(ours), mean_accept_length_per_request: ours.mean_accept_length_per_request },
    });

  it('both completed every request with the same token counts', () => {
    expect(ours.completed).toBe(PROMPTS);
    expect(ours.errors).toBe(0);
    expect(ours.total_output_tokens).toBe(ingested.total_output_tokens);
  });

  it("count the same input tokens: bench_serving's client-side prompt_len and the server's prompt_tokens (S4)", () => {
    // bench_serving sums its own tokenizer's prompt_len, BOS included
    // (sglang==0.5.4:sglang/bench_serving.py:1157-1160 for sharegpt, summed at :1629); aerie sums
    // meta_info.prompt_tokens, which SGLang counts with the same tokenizer and the same defaults
    // (sglang==0.5.4:srt/managers/tokenizer_manager.py:554), and so does the simulator: its
    // prompt_tokens are tokenizer.json's ids of the text, BOS first (sim/sglang/api-native.ts).
    // Whitespace words would give PROMPTS × INPUT_WORDS, far below: aerie's random words are
    // often outside the sim vocabulary and split into bytes.
    expect(ours.total_input_tokens, report()).toBe(ingested.total_input_tokens);
    expect(ours.total_input_tokens, report()).toBeGreaterThan(PROMPTS * INPUT_WORDS);
  });

  it('output throughput agrees within 20%', () => {
    // Both run the same closed loop (C in flight, 6 rounds) against the same deterministic step
    // costs; what differs is each client's own time per request (bench_serving opens a new
    // aiohttp session per request and parses every chunk in Python on a shared 2-core machine)
    // and that bench_serving's duration also covers its GET /get_server_info after the last
    // request (sglang==0.5.4:sglang/bench_serving.py:1884-1903, read before the clock stops at :1906).
    // Observed on the 2-core VM under a CI run: 725-730 against 750-755 tok/s (3-4%;
    // bench_serving's duration is ~70 ms longer at equal mean E2E), so 20% is wide but not blind.
    expect(relDiff(ours.output_throughput, ingested.output_throughput), report()).toBeLessThan(0.2);
  });

  it('mean and median TTFT agree within one decode step or 50%', () => {
    // TTFT here is a one-step prefill (of the ~170 prompt tokens 48 words make,
    // drafter extend included) plus the wait for the running
    // decode step to end (0 to ~10 ms at batch 4), so small absolute shifts are large relative
    // ones: a client that is 1-2 ms later to send lands in a different phase of the step.
    // The allowance is one speculative decode step (the median TPOT × accept length ≈ one
    // step) or half the larger figure, whichever is bigger. Observed over four runs: mean
    // 12.8-18.8 ms (bench_serving; its first requests pay for Python's cold paths, p99 up to
    // 79 ms) against 14.2-15.5 ms (aerie); median 12.9-13.8 against 13.5-14.2 ms.
    const step = Math.max(ours.median_tpot_ms, ingested.median_tpot_ms) * (ours.mean_accept_length_per_request ?? 1);
    for (const k of ['mean_ttft_ms', 'median_ttft_ms'] as const) {
      const allowed = Math.max(step, 0.5 * Math.max(ours[k], ingested[k]));
      expect(
        Math.abs(ours[k] - ingested[k]),
        `${k} (allowed ${allowed.toFixed(2)} ms): ${report()}`,
      ).toBeLessThanOrEqual(allowed);
    }
  });

  it('accept length agrees within 10%', () => {
    // Both read the server's running avg_spec_accept_length after a /flush_cache: bench_serving
    // from /get_server_info internal_states[0] (sglang==0.5.4:sglang/bench_serving.py:1884-1899),
    // aerie from /server_info. The simulator seeds each request's acceptance draws by the
    // request (sim/sglang/engine.ts:61), so both clients' requests accept alike (aerie's
    // per-request mean is the same to the last digit run after run); the server's running
    // average moves only every --decode-log-interval (40) decode steps (engine.ts:336), so each
    // reader sees the level less up to 39 trailing steps of ~130, and which steps those are
    // depends on the client's timing. Observed: within 1% (1.95 against 1.94); 10% leaves room
    // for a tail of unlucky steps without letting a wrong field (e.g. accept rate ~0.3, or
    // tokens per request) pass.
    expect(ingested.accept_length, report()).not.toBeNull();
    expect(ours.accept_length, report()).not.toBeNull();
    expect(relDiff(ours.accept_length!, ingested.accept_length!), report()).toBeLessThan(0.1);
    expect(relDiff(ours.mean_accept_length_per_request!, ingested.accept_length!), report()).toBeLessThan(0.1);
  });
});

function relDiff(a: number, b: number): number {
  return Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b));
}

function pick(r: BenchServingRecord): Record<string, unknown> {
  const keys = [
    'duration',
    'output_throughput',
    'mean_ttft_ms',
    'median_ttft_ms',
    'median_tpot_ms',
    'mean_itl_ms',
    'mean_e2e_latency_ms',
    'accept_length',
    'total_input_tokens',
  ] as const;
  return Object.fromEntries(keys.map((k) => [k, r[k]]));
}
