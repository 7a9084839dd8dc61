import { describe, expect, it } from 'vitest';
import {
  AERIE_EXTRA_KEYS,
  BENCH_SERVING_KEYS,
  benchServingOnly,
  distribution,
  LATER_BENCH_SERVING_KEYS,
  summarizeLevel,
  tpotsMs,
} from '../../src/bench/metrics.js';
import { percentile } from '../../src/bench/numpy-stats.js';
import { formatJsonLine, parseJsonLine } from '../../src/bench/python-json.js';
import type { LevelRun, RequestResult } from '../../src/bench/types.js';

const req = (p: Partial<RequestResult>): RequestResult => ({
  index: 0,
  sentAtMs: 0,
  ttftMs: 0,
  itlsMs: [],
  e2eMs: 0,
  outputTokens: 0,
  promptTokens: 0,
  ...p,
});

// Three successes and one failure over 2 s, worked by hand below.
const run: LevelRun = {
  concurrency: 4,
  durationMs: 2000,
  startedAt: '2025-01-01T00:00:00.000Z',
  maxInFlight: 4,
  warmup: [],
  results: [
    req({
      index: 0,
      ttftMs: 100,
      e2eMs: 1000,
      outputTokens: 10,
      promptTokens: 20,
      itlsMs: Array(9).fill(100),
      acceptLength: 3,
      serverE2eMs: 990,
    }),
    req({
      index: 1,
      ttftMs: 200,
      e2eMs: 1200,
      outputTokens: 5,
      promptTokens: 30,
      itlsMs: [250, 250, 250, 250],
      acceptLength: 2,
    }),
    req({ index: 2, ttftMs: 300, e2eMs: 500, outputTokens: 1, promptTokens: 40 }),
    req({ index: 3, ttftMs: 0, e2eMs: 50, outputTokens: 0, promptTokens: 50, error: 'HTTP 500: boom' }),
  ],
};

describe('summarizeLevel', () => {
  const rec = summarizeLevel(run, {
    backend: 'sglang',
    datasetName: 'random',
    randomInputLen: 256,
    randomOutputLen: 10,
    acceptLength: 2.4,
    outputLensRetokenized: [10, 5, 1, 0],
  });

  it('counts only successful requests and divides totals by the duration', () => {
    expect(rec.completed).toBe(3);
    expect(rec.errors).toBe(1);
    expect(rec.error_samples).toEqual(['HTTP 500: boom']);
    expect(rec.duration).toBe(2);
    expect(rec.total_input_tokens).toBe(90);
    expect(rec.total_output_tokens).toBe(16);
    expect(rec.total_output_tokens_retokenized).toBe(16); // the answers' /tokenize counts, successful requests only
    expect(
      summarizeLevel(run, { backend: 'sglang', datasetName: 'random' }).total_output_tokens_retokenized,
    ).toBeNull();
    expect(rec.request_throughput).toBe(1.5);
    expect(rec.input_throughput).toBe(45);
    expect(rec.output_throughput).toBe(8);
  });

  it('concurrency = Σ e2e / duration', () => {
    expect(rec.concurrency).toBeCloseTo((1000 + 1200 + 500) / 2000, 12);
  });

  // Expected values from numpy 2.2.6 (np.median, np.percentile default 'linear', np.std):
  // e2e [1000, 1200, 500], ttft [100, 200, 300], tpot [100, 250].
  it('E2E and TTFT: mean, population std, numpy median and percentiles', () => {
    expect(rec.mean_e2e_latency_ms).toBeCloseTo(900, 9);
    expect(rec.std_e2e_latency_ms).toBeCloseTo(294.3920288775949, 9);
    expect(rec.median_e2e_latency_ms).toBe(1000);
    expect(rec.p90_e2e_latency_ms).toBe(1160);
    expect(rec.p95_e2e_latency_ms).toBe(1180);
    expect(rec.p99_e2e_latency_ms).toBe(1196); // interpolated, not the maximum
    expect(rec.mean_ttft_ms).toBeCloseTo(200, 9);
    expect(rec.std_ttft_ms).toBeCloseTo(81.64965809277261, 9);
    expect(rec.median_ttft_ms).toBe(200);
    expect(rec.p90_ttft_ms).toBe(280);
    expect(rec.p95_ttft_ms).toBe(290);
    expect(rec.p99_ttft_ms).toBe(298);
  });

  it('TPOT = (e2e − ttft)/(out − 1), skipping single-token requests', () => {
    expect(tpotsMs(run.results.slice(0, 3))).toEqual([100, 250]);
    expect(rec.mean_tpot_ms).toBeCloseTo(175, 9);
    expect(rec.std_tpot_ms).toBeCloseTo(75, 9);
    expect(rec.median_tpot_ms).toBe(175); // np.median of an even count: the mean of the middle two
    expect(rec.p90_tpot_ms).toBe(235);
    expect(rec.p95_tpot_ms).toBe(242.5);
    expect(rec.p99_tpot_ms).toBe(248.5);
  });

  it('ITL pools every per-token entry of the successful requests', () => {
    const pooled = [...Array(9).fill(100), 250, 250, 250, 250];
    const mean = pooled.reduce((a, b) => a + b, 0) / pooled.length;
    expect(rec.mean_itl_ms).toBeCloseTo(mean, 9);
    expect(rec.std_itl_ms).toBeCloseTo(Math.sqrt(pooled.reduce((a, v) => a + (v - mean) ** 2, 0) / pooled.length), 9);
    expect(rec.median_itl_ms).toBe(100);
    expect(rec.p95_itl_ms).toBe(250);
    expect(rec.p99_itl_ms).toBe(250);
    expect(rec.p90_itl_ms).toBe(250);
    expect(rec.max_itl_ms).toBe(250);
    expect(rec.itl_per).toBe('token');
  });

  // sglang==0.5.4's own calculate_metrics (sglang/bench_serving.py:1604-1687, run once in
  // .venv-sglang-bench on these four outputs, seconds in, a whitespace tokenizer standing in for
  // the retokenizer) printed these; aerie's figures under the same names must equal them.
  it('equals real bench_serving 0.5.4 calculate_metrics on the same outputs', () => {
    const judge: Record<string, number> = {
      completed: 3,
      total_input_tokens: 90,
      total_output_tokens: 16,
      total_output_tokens_retokenized: 16,
      request_throughput: 1.5,
      input_throughput: 45,
      output_throughput: 8,
      mean_ttft_ms: 200.00000000000003,
      median_ttft_ms: 200,
      std_ttft_ms: 81.6496580927726,
      p99_ttft_ms: 298,
      mean_tpot_ms: 175,
      median_tpot_ms: 175,
      std_tpot_ms: 75,
      p99_tpot_ms: 248.5,
      mean_itl_ms: 146.15384615384613,
      median_itl_ms: 100,
      std_itl_ms: 69.23076923076923,
      p95_itl_ms: 250,
      p99_itl_ms: 250,
      max_itl_ms: 250,
      mean_e2e_latency_ms: 900,
      median_e2e_latency_ms: 1000,
      std_e2e_latency_ms: 294.3920288775949,
      p99_e2e_latency_ms: 1196,
      concurrency: 1.35,
      total_throughput: 53,
    };
    const got = rec as unknown as Record<string, number>;
    for (const [k, v] of Object.entries(judge)) expect(got[k], k).toBeCloseTo(v, 9);
  });

  it('accept length: server value as accept_length, per-request mean as an extra', () => {
    expect(rec.accept_length).toBe(2.4);
    expect(rec.mean_accept_length_per_request).toBe(2.5);
    expect(rec.mean_server_e2e_latency_ms).toBe(990);
  });

  it('writes bench_serving’s keys in its order, then the later releases’ keys, then aerie’s extras', () => {
    const keys = Object.keys(rec);
    expect(keys).toEqual([...BENCH_SERVING_KEYS, ...LATER_BENCH_SERVING_KEYS, ...AERIE_EXTRA_KEYS]);
    expect(rec.tag).toBeNull();
    expect(rec.server_info).toBeNull();
    expect(rec.total_throughput).toBe((90 + 16) / 2);
    expect(Object.keys(benchServingOnly(rec))).toEqual([...BENCH_SERVING_KEYS]);
    expect(rec.max_concurrency).toBe(4);
    expect(rec.random_input_len).toBe(256);
    expect(rec.random_output_len).toBe(10);
    expect(rec.random_range_ratio).toBe(0);
    expect(rec.sharegpt_output_len).toBeNull();
  });

  it('writes request_rate inf as Python’s bare Infinity and reads it back', () => {
    expect(rec.request_rate).toBe(Infinity);
    const line = formatJsonLine(benchServingOnly(rec));
    expect(
      line.startsWith(
        '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, "max_concurrency": 4, "sharegpt_output_len": null,',
      ),
    ).toBe(true);
    expect(parseJsonLine(line)).toEqual(benchServingOnly(rec));
  });

  it('gives zeros, not NaN, when every request failed', () => {
    const all = summarizeLevel({ ...run, results: [run.results[3]] }, { backend: 'sglang', datasetName: 'random' });
    expect(all.completed).toBe(0);
    expect(all.errors).toBe(1);
    for (const k of BENCH_SERVING_KEYS) {
      const v = all[k];
      if (typeof v === 'number' && k !== 'request_rate') expect(Number.isFinite(v), k).toBe(true);
    }
    expect(all.mean_itl_ms).toBe(0);
    expect(all.accept_length).toBeNull();
    expect(all.mean_accept_length_per_request).toBeNull();
  });
});

// Every expected value below is numpy 2.2.6's (.venv-sglang-bench/bin/python):
// np.median, np.percentile(v, p) with the default method 'linear', np.max.
describe('distribution: numpy definitions on known sets', () => {
  it('0.01..1.00: the even-count median is the mean of the middle two, percentiles interpolate', () => {
    const values = Array.from({ length: 100 }, (_, i) => (i + 1) / 100);
    const d = distribution(values);
    expect(d.median).toBe(0.505);
    expect(d.p90).toBe(0.9010000000000001);
    expect(d.p95).toBe(0.9504999999999999);
    expect(d.p99).toBe(0.9901000000000001);
    expect(d.max).toBe(1);
    expect(d.mean).toBeCloseTo(0.505, 12);
  });

  it('large values and a two-value set: the same digits as numpy', () => {
    const values = Array.from({ length: 100 }, (_, i) => (i + 1) * 1000.3);
    const d = distribution(values);
    expect(d.median).toBe(50515.149999999994);
    expect(d.p90).toBe(90127.03000000001);
    expect(d.p95).toBe(95078.515);
    expect(d.p99).toBe(99039.70300000001);
    const few = distribution([5, 123456.789]);
    expect(few.median).toBe(61730.8945);
    expect(few.p90).toBe(111111.6101);
    expect(few.p95).toBe(117284.19955);
    expect(few.p99).toBe(122222.27111); // below the maximum, where a nearest rank would give 123456.789
    expect(percentile([1, 2, 3, 4], 95)).toBe(3.8499999999999996);
    expect(percentile([4, 1, 3, 2], 99)).toBe(3.9699999999999998);
    expect(percentile([7], 99)).toBe(7);
  });

  it('is order independent and empty-safe (zeros, as np.percentile(x or 0, p))', () => {
    expect(distribution([3, 1, 2])).toEqual(distribution([1, 2, 3]));
    expect(distribution([])).toEqual({ count: 0, mean: 0, std: 0, median: 0, p90: 0, p95: 0, p99: 0, max: 0 });
    expect(percentile([], 99)).toBe(0);
  });
});
