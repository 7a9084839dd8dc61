// Summarise one concurrency level into the record bench_serving writes as a JSONL line,
// so researchers can compare aerie's numbers with their own bench_serving runs.
//
// Definitions (bench_serving's calculate_metrics; only successful requests count):
//   duration = first send → last completion (s); throughputs = totals / duration;
//   TTFT; E2E = latency; TPOT = (E2E − TTFT) / (output_tokens − 1) for requests with
//   more than one output token; ITL = every per-token entry of every request pooled;
//   concurrency = Σ E2E / duration; std is the population std (numpy's ddof=0).
//
// Percentiles (median, p90, p95, p99) come from an HDR histogram of integer
// microseconds with 3 significant digits: each is the nearest-rank value (the
// smallest recorded value with at least p% of samples at or below it), reported as
// the top of its HDR bucket, so it can read up to 0.1% high (exact below 2.048 ms),
// and is clamped to the largest value recorded. numpy interpolates linearly between
// ranks instead, so on small sets (a level of 16 requests) aerie's p99 is the maximum
// where numpy's sits just under it, and an even-sized median is the lower middle value
// rather than the mean of the two. Mean and std are plain arithmetic on the exact values.

import { createRequire } from 'node:module';
import type * as Hdr from 'hdr-histogram-js';
import type { LevelRun, RequestResult } from './types.js';

// hdr-histogram-js (~17 MB resident) loads with the first distribution, not with every worker.
let hdrLib: typeof Hdr | undefined;
const hdr = (): typeof Hdr => (hdrLib ??= createRequire(import.meta.url)('hdr-histogram-js') as typeof Hdr);

/** The keys bench_serving writes, in its order. */
export const BENCH_SERVING_KEYS = [
  'backend', 'dataset_name', 'request_rate', 'max_concurrency', 'sharegpt_output_len',
  'random_input_len', 'random_output_len', 'random_range_ratio', 'duration', 'completed',
  'total_input_tokens', 'total_input_text_tokens', 'total_input_vision_tokens', 'total_output_tokens', 'total_output_tokens_retokenized',
  'request_throughput', 'input_throughput', 'output_throughput',
  'mean_e2e_latency_ms', 'median_e2e_latency_ms', 'std_e2e_latency_ms', 'p99_e2e_latency_ms',
  'mean_ttft_ms', 'median_ttft_ms', 'std_ttft_ms', 'p99_ttft_ms',
  'mean_tpot_ms', 'median_tpot_ms', 'std_tpot_ms', 'p99_tpot_ms',
  'mean_itl_ms', 'median_itl_ms', 'std_itl_ms', 'p95_itl_ms', 'p99_itl_ms',
  'concurrency', 'accept_length',
] as const;

/** aerie's additions; none of these names is written by bench_serving. */
export const AERIE_EXTRA_KEYS = [
  'p90_e2e_latency_ms', 'p90_ttft_ms', 'p90_tpot_ms', 'p90_itl_ms', 'max_itl_ms',
  'errors', 'error_samples', 'mean_accept_length_per_request', 'mean_server_e2e_latency_ms',
  'max_in_flight', 'started_at',
] as const;

type BenchServingNumberKey = Exclude<
  (typeof BENCH_SERVING_KEYS)[number],
  'backend' | 'dataset_name' | 'max_concurrency' | 'sharegpt_output_len' | 'accept_length' | 'total_input_text_tokens' | 'total_input_vision_tokens'
>;

export type BenchServingCore = { [K in BenchServingNumberKey]: number } & {
  backend: string;
  dataset_name: string;
  /** Infinity for closed-loop levels (bench_serving's default); see formatJsonLine for how it is written. */
  request_rate: number;
  max_concurrency: number | null;
  sharegpt_output_len: number | null;
  /** From /server_info after the level (what bench_serving reports), null when unknown. */
  accept_length: number | null;
  /** bench_serving 0.5.4's split of total_input_tokens (bench_serving.py:2004-2005); null where a release writes none. */
  total_input_text_tokens: number | null;
  total_input_vision_tokens: number | null;
};

/** Figures aerie adds; null where a source (an ingested bench_serving line) does not have them. */
export interface AerieExtras {
  p90_e2e_latency_ms: number | null;
  p90_ttft_ms: number | null;
  p90_tpot_ms: number | null;
  p90_itl_ms: number | null;
  /** bench_serving prints this but does not write it. */
  max_itl_ms: number | null;
  /** Failed requests (left out of every latency figure, as bench_serving does). */
  errors: number;
  /** Up to 5 distinct error messages, to say why without a log dive. */
  error_samples: string[];
  /** Mean of per-request accept lengths from meta_info; null without speculation. */
  mean_accept_length_per_request: number | null;
  /** Mean of meta_info.e2e_latency (server side), null when the server does not report it. */
  mean_server_e2e_latency_ms: number | null;
  /** Most requests the client had in flight at once. */
  max_in_flight: number | null;
  started_at: string;
}

export type BenchServingRecord = BenchServingCore & AerieExtras;

export interface SummaryMeta {
  backend: string;
  datasetName: string;
  /** Default Infinity: aerie's levels are closed-loop, all requests "arrive" at once. */
  requestRate?: number;
  randomInputLen?: number;
  randomOutputLen?: number;
  randomRangeRatio?: number;
  sharegptOutputLen?: number;
  /** Server-side average accept length read after the level (bench_serving's accept_length). */
  acceptLength?: number;
}

// bench_serving's argparse defaults, written whatever the dataset.
const DEFAULT_RANDOM_INPUT_LEN = 1024;
const DEFAULT_RANDOM_OUTPUT_LEN = 1024;
const DEFAULT_RANDOM_RANGE_RATIO = 0.0;
const MAX_ERROR_SAMPLES = 5;

export interface Distribution {
  count: number;
  mean: number;
  std: number;
  median: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

const EMPTY: Distribution = { count: 0, mean: 0, std: 0, median: 0, p90: 0, p95: 0, p99: 0, max: 0 };

/** Mean/std exact; percentiles from HDR (see the header). Empty input gives zeros, like bench_serving's `np.mean(x or 0)`. */
export function distribution(valuesMs: readonly number[]): Distribution {
  const n = valuesMs.length;
  if (n === 0) return { ...EMPTY };
  let sum = 0;
  let max = -Infinity;
  for (const v of valuesMs) {
    sum += v;
    if (v > max) max = v;
  }
  const mean = sum / n;
  let sq = 0;
  for (const v of valuesMs) sq += (v - mean) * (v - mean);
  const h = hdr().build({ numberOfSignificantValueDigits: 3 });
  try {
    for (const v of valuesMs) h.recordValue(Math.max(0, Math.round(v * 1000)));
    const at = (p: number): number => Math.min(h.getValueAtPercentile(p) / 1000, Math.max(max, 0));
    return { count: n, mean, std: Math.sqrt(sq / n), median: at(50), p90: at(90), p95: at(95), p99: at(99), max };
  } finally {
    h.destroy();
  }
}

/** (E2E − TTFT) / (output − 1) for each request with more than one output token. */
export function tpotsMs(results: readonly RequestResult[]): number[] {
  const out: number[] = [];
  for (const r of results) if (r.outputTokens > 1) out.push((r.e2eMs - r.ttftMs) / (r.outputTokens - 1));
  return out;
}

export function summarizeLevel(run: LevelRun, meta: SummaryMeta): BenchServingRecord {
  const ok = run.results.filter((r) => r.error === undefined);
  const failed = run.results.filter((r) => r.error !== undefined);
  const durationS = run.durationMs / 1000;
  const per = (x: number): number => (durationS > 0 ? x / durationS : 0);

  let totalIn = 0;
  let totalOut = 0;
  let sumE2e = 0;
  const itls: number[] = [];
  for (const r of ok) {
    totalIn += r.promptTokens;
    totalOut += r.outputTokens;
    sumE2e += r.e2eMs;
    for (const v of r.itlsMs) itls.push(v);
  }
  const e2e = distribution(ok.map((r) => r.e2eMs));
  const ttft = distribution(ok.map((r) => r.ttftMs));
  const tpot = distribution(tpotsMs(ok));
  const itl = distribution(itls);

  const core: BenchServingCore = {
    backend: meta.backend,
    dataset_name: meta.datasetName,
    request_rate: meta.requestRate ?? Infinity,
    max_concurrency: run.concurrency,
    sharegpt_output_len: meta.sharegptOutputLen ?? null,
    random_input_len: meta.randomInputLen ?? DEFAULT_RANDOM_INPUT_LEN,
    random_output_len: meta.randomOutputLen ?? DEFAULT_RANDOM_OUTPUT_LEN,
    random_range_ratio: meta.randomRangeRatio ?? DEFAULT_RANDOM_RANGE_RATIO,
    duration: durationS,
    completed: ok.length,
    total_input_tokens: totalIn,
    // aerie's load generator sends text only.
    total_input_text_tokens: totalIn,
    total_input_vision_tokens: 0,
    total_output_tokens: totalOut,
    // bench_serving retokenizes the text client-side; aerie has no tokenizer, so it
    // repeats the server's count.
    total_output_tokens_retokenized: totalOut,
    request_throughput: per(ok.length),
    input_throughput: per(totalIn),
    output_throughput: per(totalOut),
    mean_e2e_latency_ms: e2e.mean,
    median_e2e_latency_ms: e2e.median,
    std_e2e_latency_ms: e2e.std,
    p99_e2e_latency_ms: e2e.p99,
    mean_ttft_ms: ttft.mean,
    median_ttft_ms: ttft.median,
    std_ttft_ms: ttft.std,
    p99_ttft_ms: ttft.p99,
    mean_tpot_ms: tpot.mean,
    median_tpot_ms: tpot.median,
    std_tpot_ms: tpot.std,
    p99_tpot_ms: tpot.p99,
    mean_itl_ms: itl.mean,
    median_itl_ms: itl.median,
    std_itl_ms: itl.std,
    p95_itl_ms: itl.p95,
    p99_itl_ms: itl.p99,
    concurrency: durationS > 0 ? sumE2e / run.durationMs : 0,
    accept_length: meta.acceptLength ?? null,
  };
  const extras: AerieExtras = {
    p90_e2e_latency_ms: e2e.p90,
    p90_ttft_ms: ttft.p90,
    p90_tpot_ms: tpot.p90,
    p90_itl_ms: itl.p90,
    max_itl_ms: itl.max,
    errors: failed.length,
    error_samples: distinctErrors(failed),
    mean_accept_length_per_request: meanOf(ok.map((r) => r.acceptLength)),
    mean_server_e2e_latency_ms: meanOf(ok.map((r) => r.serverE2eMs)),
    max_in_flight: run.maxInFlight,
    started_at: run.startedAt,
  };
  return { ...core, ...extras };
}

/** Only bench_serving's keys, in its order (for tools that expect exactly its lines). */
export function benchServingOnly(record: BenchServingRecord): BenchServingCore {
  const out: Record<string, unknown> = {};
  for (const k of BENCH_SERVING_KEYS) out[k] = record[k];
  return out as BenchServingCore;
}

function meanOf(values: readonly (number | undefined)[]): number | null {
  let sum = 0;
  let n = 0;
  for (const v of values) {
    if (v === undefined) continue;
    sum += v;
    n++;
  }
  return n === 0 ? null : sum / n;
}

function distinctErrors(failed: readonly RequestResult[]): string[] {
  const seen = new Set<string>();
  for (const r of failed) {
    if (seen.size >= MAX_ERROR_SAMPLES) break;
    if (r.error !== undefined) seen.add(r.error);
  }
  return [...seen];
}
