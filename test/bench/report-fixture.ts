/** Records for report tests: all 8 default levels, both variants, every field filled. */
import { BENCH_SERVING_KEYS, type BenchServingRecord } from '../../src/bench/metrics.js';

export const LEVELS = [1, 2, 5, 10, 30, 70, 100, 250];

/** A full record: every bench_serving key and aerie extra, with plausible numbers. */
export function record(c: number, outTokS: number, accept: number | null): BenchServingRecord {
  const r: Record<string, unknown> = {};
  for (const k of BENCH_SERVING_KEYS) r[k] = 1;
  return {
    ...(r as unknown as BenchServingRecord),
    backend: 'sglang',
    dataset_name: 'random',
    request_rate: Infinity,
    max_concurrency: c,
    sharegpt_output_len: null,
    output_throughput: outTokS,
    p99_ttft_ms: 40 + c,
    p99_itl_ms: 8 + c / 10,
    accept_length: accept === null ? null : accept - 0.1,
    completed: 2 * c,
    p90_e2e_latency_ms: 1,
    p90_ttft_ms: 1,
    p90_tpot_ms: 1,
    p90_itl_ms: 1,
    max_itl_ms: 1,
    errors: 0,
    error_samples: [],
    mean_accept_length_per_request: accept,
    mean_server_e2e_latency_ms: 1,
    max_in_flight: c,
    started_at: '2026-01-01T00:00:00.000Z',
  };
}

export const sweepInput = {
  title: 'Llama <8B> & EAGLE3',
  baseline: LEVELS.map((c) => record(c, 150 * Math.min(c, 64), null)),
  speculative: LEVELS.map((c) => record(c, (c < 70 ? 340 : 120) * Math.min(c, 48), 3.2)),
  settings: ['dataset: random'],
};
