// The record of one measured level: bench_serving's JSONL line, key for key, and the figures
// aerie adds after them (metrics.ts fills it; rounds.ts, the report and the results file read it).
// Types and key lists only, so every reader can import it without importing the summariser.

import type { AcceptFigures } from './accept.js';
import type { CategoryFigures } from './categories.js';

/** The keys bench_serving writes, in its order. */
export const BENCH_SERVING_KEYS = [
  'backend',
  'dataset_name',
  'request_rate',
  'max_concurrency',
  'sharegpt_output_len',
  'random_input_len',
  'random_output_len',
  'random_range_ratio',
  'duration',
  'completed',
  'total_input_tokens',
  'total_input_text_tokens',
  'total_input_vision_tokens',
  'total_output_tokens',
  'total_output_tokens_retokenized',
  'request_throughput',
  'input_throughput',
  'output_throughput',
  'mean_e2e_latency_ms',
  'median_e2e_latency_ms',
  'std_e2e_latency_ms',
  'p99_e2e_latency_ms',
  'mean_ttft_ms',
  'median_ttft_ms',
  'std_ttft_ms',
  'p99_ttft_ms',
  'mean_tpot_ms',
  'median_tpot_ms',
  'std_tpot_ms',
  'p99_tpot_ms',
  'mean_itl_ms',
  'median_itl_ms',
  'std_itl_ms',
  'p95_itl_ms',
  'p99_itl_ms',
  'concurrency',
  'accept_length',
] as const;

/**
 * Keys later bench_serving releases add (and aerie computes alike, or leaves null):
 * 0.5.9 adds tag, server_info, total_throughput, p90_e2e_latency_ms, max_output_tokens_per_s,
 * max_concurrent_requests (sglang==0.5.9:sglang/bench_serving.py:2671-2718); 0.5.23 every p90 and
 * p95 (sglang==0.5.23:sglang/benchmark/serving.py:1855-1908). max_itl_ms is printed, never written.
 */
export const LATER_BENCH_SERVING_KEYS = [
  'tag',
  'server_info',
  'total_throughput',
  'p90_e2e_latency_ms',
  'p95_e2e_latency_ms',
  'p90_ttft_ms',
  'p95_ttft_ms',
  'p90_tpot_ms',
  'p95_tpot_ms',
  'p90_itl_ms',
  'max_output_tokens_per_s',
  'max_concurrent_requests',
] as const;

/** aerie's additions; none of these names is written by bench_serving. */
export const AERIE_EXTRA_KEYS = [
  'max_itl_ms',
  'total_input_tokens_server',
  'bench_serving_rules',
  'chat_text_basis',
  'itl_per',
  'requests_with_reasoning',
  'mean_time_to_first_reasoning_ms',
  'median_time_to_first_reasoning_ms',
  'p99_time_to_first_reasoning_ms',
  'mean_time_to_first_content_ms',
  'total_reasoning_chunks',
  'total_reasoning_tokens',
  'errors',
  'error_samples',
  'mean_accept_length_per_request',
  'mean_server_e2e_latency_ms',
  'max_in_flight',
  'started_at',
  'bench_serving_other_fields',
  'accept_length_pooled',
  'spec_verify_steps',
  'spec_completion_tokens',
  'spec_requests',
  'spec_accept_histogram',
  'accept_per_position',
  'server_simulated',
  'rounds',
  'categories',
] as const;

type BenchServingNumberKey = Exclude<
  (typeof BENCH_SERVING_KEYS)[number],
  | 'backend'
  | 'dataset_name'
  | 'max_concurrency'
  | 'sharegpt_output_len'
  | 'accept_length'
  | 'total_input_text_tokens'
  | 'total_input_vision_tokens'
  | 'total_input_tokens'
  | 'input_throughput'
  | 'total_output_tokens_retokenized'
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
  /** Σ bench_serving's prompt_len (see the header); null on chat when the raw prompts could not be counted. */
  total_input_tokens: number | null;
  input_throughput: number | null;
  /** Σ len(encode(answer, add_special_tokens=False)) by the server's tokenizer (/tokenize); null when it could not be asked. */
  total_output_tokens_retokenized: number | null;
};

/** bench_serving's names from later releases; null where the source (an older line, aerie) has none. */
export interface BenchServingLater {
  tag: string | null;
  server_info: Record<string, unknown> | null;
  /** (total_input_tokens + total_output_tokens) / duration (sglang==0.5.9:sglang/bench_serving.py:2230). */
  total_throughput: number | null;
  p90_e2e_latency_ms: number | null;
  p95_e2e_latency_ms: number | null;
  p90_ttft_ms: number | null;
  p95_ttft_ms: number | null;
  p90_tpot_ms: number | null;
  p95_tpot_ms: number | null;
  p90_itl_ms: number | null;
  max_output_tokens_per_s: number | null;
  max_concurrent_requests: number | null;
}

/**
 * Figures aerie adds; null where a source (an ingested bench_serving line) does not have them.
 * Since definitions 3 (accept.ts, rounds.ts, categories.ts) a record also carries both accept
 * lengths, the rounds it was taken in and per-category figures; records written before lack
 * those keys, and every reader takes a missing key as null.
 */
export interface AerieExtras extends AcceptFigures {
  /** What the server said marks it as a simulator (its /server_info), e.g. "aerie-sim 0.5.23"; null for a real server. */
  server_simulated: string | null;
  /** Per-round figures of the level (rounds.ts); null on a record of one measurement. */
  rounds: RoundFigures[] | null;
  /** Per prompt category, when the dataset carries one (categories.ts); null otherwise. */
  categories: CategoryFigures[] | null;
  /** np.max of the pooled ITLs: bench_serving prints this but does not write it. */
  max_itl_ms: number | null;
  /** Σ the server's prompt_tokens: the chat template included on chat; null for an ingested line. */
  total_input_tokens_server: number | null;
  /** Whose definitions the chat timing follows (bench-rules.ts), e.g. "bench_serving 0.5.23 (server reports sglang 0.5.23)". */
  bench_serving_rules: string | null;
  /** Chat: which deltas TTFT and ITL time: "content" (bench_serving ≤ 0.5.9) or "reasoning+content" (0.5.12+). */
  chat_text_basis: 'content' | 'reasoning+content' | null;
  /** "token": each chunk's gap split over its tokens; "chunk": one ITL per chunk (chat without speculation, or 0.5.4). */
  itl_per: 'token' | 'chunk' | null;
  /** Chat: successful requests whose answer streamed reasoning_content. */
  requests_with_reasoning: number | null;
  /** Chat: send → first reasoning delta, over the requests with reasoning (numpy definitions). */
  mean_time_to_first_reasoning_ms: number | null;
  median_time_to_first_reasoning_ms: number | null;
  p99_time_to_first_reasoning_ms: number | null;
  /** Chat: send → first content delta, whatever chat_text_basis is. */
  mean_time_to_first_content_ms: number | null;
  total_reasoning_chunks: number | null;
  /** Σ usage.reasoning_tokens; null when the server reported none. */
  total_reasoning_tokens: number | null;
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
  /** An ingested line's keys that no list above names (goodput, cache_report, --output-details arrays but errors), kept as written. */
  bench_serving_other_fields: Record<string, unknown> | null;
}

export type BenchServingRecord = BenchServingCore & BenchServingLater & AerieExtras;

/** One round's headline figures within a level (rounds.ts). */
export interface RoundFigures {
  round: number;
  started_at: string;
  duration: number;
  completed: number;
  errors: number;
  output_throughput: number;
  request_throughput: number;
  median_ttft_ms: number;
  p99_ttft_ms: number;
  median_itl_ms: number;
  p99_itl_ms: number;
  mean_tpot_ms: number;
  accept_length: number | null;
  accept_length_pooled: number | null;
  mean_accept_length_per_request: number | null;
  spec_verify_steps: number | null;
  spec_completion_tokens: number | null;
  spec_requests: number | null;
  spec_accept_histogram: number[] | null;
  categories: CategoryFigures[] | null;
}
