// Summarise one concurrency level into the record bench_serving writes as a JSONL line,
// so researchers can compare aerie's numbers with their own bench_serving runs.
//
// Definitions (bench_serving's calculate_metrics, sglang==0.5.4:sglang/bench_serving.py:1604-1687;
// only successful requests count):
//   duration = first send → last completion (s); throughputs = totals / duration;
//   TTFT; E2E = latency; TPOT = (E2E − TTFT) / (output_tokens − 1) for requests with
//   more than one output token; ITL = every per-token entry of every request pooled (chat:
//   per chunk or per token as the server's bench_serving release does, bench-rules.ts);
//   concurrency = Σ E2E / duration. Median and every percentile are numpy's exactly, mean
//   and std to the last digit or so (numpy sums pairwise) (numpy-stats.ts): a figure under
//   one of bench_serving's names means what it means there.
//
// Input tokens. bench_serving's total_input_tokens sums its dataset rows' prompt_len, the
// client tokenizer's len(tokenizer.encode(prompt)) with special tokens (BOS) and without the
// chat template, whichever backend (sglang==0.5.4:sglang/bench_serving.py:1157-1160, summed at
// :1629; sglang==0.5.23:sglang/benchmark/serving.py:1168, still the dataset's although 0.5.23
// records the server's count for input_lens, :264-286). On /generate the server's
// meta_info.prompt_tokens is that same number: the tokenizer manager encodes the text with
// the tokenizer's defaults, special tokens added (sglang==0.5.4:srt/managers/tokenizer_manager.py:554,
// sglang==0.5.23:srt/managers/tokenizer_manager.py:1068). On chat the server's usage.prompt_tokens
// counts the templated conversation, so aerie takes bench_serving's figure from SGLang's
// /tokenize of the raw prompts (tokenize.ts) and writes the server's own under
// total_input_tokens_server; without /tokenize counts the bench_serving-named figures are null.

import { rulesLabel, benchServingRules, type BenchServingRules } from './bench-rules.js';
import { distribution, type Distribution } from './numpy-stats.js';
import { acceptFigures, type AcceptFigures } from './accept.js';
import { categoryFigures, type CategoryFigures } from './categories.js';
import { reasoningFigures } from './metrics-chat.js';
import type { LevelRun, RequestResult } from './types.js';

export { distribution, type Distribution } from './numpy-stats.js';
export {
  AERIE_EXTRA_KEYS,
  BENCH_SERVING_KEYS,
  LATER_BENCH_SERVING_KEYS,
  type AerieExtras,
  type BenchServingCore,
  type BenchServingLater,
  type BenchServingRecord,
} from './record.js';
import {
  AERIE_EXTRA_KEYS,
  BENCH_SERVING_KEYS,
  type AerieExtras,
  type BenchServingCore,
  type BenchServingLater,
  type BenchServingRecord,
} from './record.js';

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
  /** Whose bench_serving definitions the level follows; default: the newest checked release. */
  rules?: BenchServingRules;
  /**
   * bench_serving's prompt_len of each prompt of the level, by RequestResult.index (SGLang's
   * /tokenize of the raw prompt, special tokens added). Needed on chat; on /generate the
   * server's prompt_tokens is the same number and is used when this is absent.
   */
  promptLens?: readonly number[];
  /** bench_serving's retokenized output count of each answer, by RequestResult.index; without it total_output_tokens_retokenized is null. */
  outputLensRetokenized?: readonly number[];
  /** Each prompt's category, by RequestResult.index, when the dataset carries one. */
  categories?: readonly (string | undefined)[];
  /** server_simulated (see AerieExtras), from the server's own /server_info. */
  simulated?: string | null;
}

// bench_serving's argparse defaults, written whatever the dataset.
const DEFAULT_RANDOM_INPUT_LEN = 1024;
const DEFAULT_RANDOM_OUTPUT_LEN = 1024;
const DEFAULT_RANDOM_RANGE_RATIO = 0.0;
const MAX_ERROR_SAMPLES = 5;

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
  const rules = meta.rules ?? benchServingRules();
  const chat = meta.backend === 'sglang-oai-chat';
  // bench_serving splits chat chunks per token only when the server reported speculation (bench-rules.ts).
  const splitChat = rules.chatSplitsSpeculativeChunks && (meta.acceptLength ?? 0) > 0;

  let serverIn = 0;
  let totalIn: number | null = 0;
  let totalOut = 0;
  let retokenized: number | null = meta.outputLensRetokenized ? 0 : null;
  let sumE2e = 0;
  const itls: number[] = [];
  for (const r of ok) {
    serverIn += r.promptTokens;
    const len = meta.promptLens?.[r.index] ?? (chat ? undefined : r.promptTokens);
    totalIn = totalIn === null || len === undefined ? null : totalIn + len;
    totalOut += r.outputTokens;
    const re = meta.outputLensRetokenized?.[r.index];
    retokenized = retokenized === null || re === undefined ? null : retokenized + re;
    sumE2e += r.e2eMs;
    for (const v of chat && !splitChat ? (r.chunkItlsMs ?? r.itlsMs) : r.itlsMs) itls.push(v);
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
    // bench_serving retokenizes the answers client-side (sglang==0.5.4:sglang/bench_serving.py:1625-1627);
    // aerie asks the server's tokenizer the same question after the level, or writes null.
    total_output_tokens_retokenized: retokenized,
    request_throughput: per(ok.length),
    input_throughput: totalIn === null ? null : per(totalIn),
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
  const later: BenchServingLater = {
    tag: null,
    server_info: null,
    total_throughput: totalIn === null ? null : per(totalIn + totalOut),
    p90_e2e_latency_ms: e2e.p90,
    p95_e2e_latency_ms: e2e.p95,
    p90_ttft_ms: ttft.p90,
    p95_ttft_ms: ttft.p95,
    p90_tpot_ms: tpot.p90,
    p95_tpot_ms: tpot.p95,
    p90_itl_ms: itl.p90,
    max_output_tokens_per_s: null,
    max_concurrent_requests: null,
  };
  const extras: AerieExtras = {
    max_itl_ms: itl.max,
    total_input_tokens_server: serverIn,
    bench_serving_rules: rulesLabel(rules),
    ...reasoningFigures(ok, chat, rules),
    itl_per: chat && !splitChat ? 'chunk' : 'token',
    errors: failed.length,
    error_samples: distinctErrors(failed),
    mean_accept_length_per_request: meanOf(ok.map((r) => r.acceptLength)),
    mean_server_e2e_latency_ms: meanOf(ok.map((r) => r.serverE2eMs)),
    max_in_flight: run.maxInFlight,
    started_at: run.startedAt,
    bench_serving_other_fields: null,
    ...acceptFigures(ok),
    server_simulated: meta.simulated ?? null,
    rounds: null,
    categories: meta.categories ? categoryFigures(ok, meta.categories) : null,
  };
  return { ...core, ...later, ...orderedExtras(extras) };
}

/** The extras in AERIE_EXTRA_KEYS order, so every record's line reads the same. */
export function orderedExtras(e: AerieExtras): AerieExtras {
  const out: Record<string, unknown> = {};
  for (const k of AERIE_EXTRA_KEYS) out[k] = e[k];
  return out as unknown as AerieExtras;
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
