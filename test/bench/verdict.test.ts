// Golden tests on fixed inputs for the figures behind the verdict: the median intervals,
// speedup over paired rounds, the crossover and its interval, both accept lengths.
import { describe, expect, it } from 'vitest';
import { acceptFigures, mergeAcceptFigures, perPosition } from '../../src/bench/accept.js';
import { crossing, crossover, suggestedMaxRunning, verdictLine } from '../../src/bench/crossover.js';
import type { BenchServingRecord } from '../../src/bench/metrics.js';
import { aggregateRounds, metricInterval, speedupInterval } from '../../src/bench/rounds.js';
import { binomialHalfCdf, medianInterval, verdict } from '../../src/bench/stats.js';
import type { RequestResult } from '../../src/bench/types.js';

const round = (out: number, p: Partial<BenchServingRecord> = {}): BenchServingRecord =>
  ({
    max_concurrency: 10,
    output_throughput: out,
    completed: 10,
    errors: 0,
    error_samples: [],
    p99_ttft_ms: out / 10,
    p99_itl_ms: 1,
    started_at: 't',
    ...p,
  }) as BenchServingRecord;

describe('median intervals (order statistics, exact)', () => {
  it('binomial(n, ½) cdf', () => {
    expect(binomialHalfCdf(3, 0)).toBe(1 / 8);
    expect(binomialHalfCdf(5, 1)).toBe(6 / 32);
    expect(binomialHalfCdf(10, 1)).toBe(11 / 1024);
    expect(binomialHalfCdf(4, 4)).toBe(1);
  });

  it('3 rounds: [min, max] at 75 %; 5: [min, max] at 93.75 %; 10: 2nd to 9th at 97.85 %', () => {
    expect(medianInterval([3, 1, 2])).toEqual({ median: 2, lo: 1, hi: 3, n: 3, coverage: 0.75 });
    expect(medianInterval([5, 1, 4, 2, 3])).toEqual({ median: 3, lo: 1, hi: 5, n: 5, coverage: 0.9375 });
    expect(medianInterval([10, 9, 8, 7, 6, 5, 4, 3, 2, 1])).toEqual({
      median: 5.5,
      lo: 2,
      hi: 9,
      n: 10,
      coverage: 1 - 22 / 1024,
    });
    expect(medianInterval([7])).toEqual({ median: 7, lo: 7, hi: 7, n: 1, coverage: 0 });
    expect(medianInterval([NaN])).toBeNull();
  });

  it('decides only when the interval lies on one side of 1', () => {
    expect(verdict(medianInterval([1.2, 1.1, 1.3]))).toBe('above');
    expect(verdict(medianInterval([0.8, 0.9, 0.95]))).toBe('below');
    expect(verdict(medianInterval([0.9, 1.05, 1.2]))).toBe('undecided');
    expect(verdict(medianInterval([2]))).toBe('undecided');
  });
});

describe('rounds', () => {
  const spec = aggregateRounds([round(300), round(330), round(240)]);
  const base = aggregateRounds([round(100), round(150), round(120)]);

  it("keeps the median round's bench_serving line and every round's figures", () => {
    expect(spec.output_throughput).toBe(300);
    expect(spec.rounds!.map((r) => r.output_throughput)).toEqual([300, 330, 240]);
    expect(metricInterval(spec, 'output_throughput')).toMatchObject({ median: 300, lo: 240, hi: 330 });
    expect(metricInterval(spec, 'p99_ttft_ms')).toMatchObject({ median: 30, lo: 24, hi: 33 });
  });

  it('takes speedup from the paired rounds, not from the two medians', () => {
    // Round ratios 3.0, 2.2, 2.0: median 2.2 in [2.0, 3.0]; the ratio of medians would be 300/120 = 2.5.
    expect(speedupInterval(spec, base)).toMatchObject({ median: 2.2, lo: 2, hi: 3, n: 3 });
  });

  it('reads a record from before rounds as one round', () => {
    expect(speedupInterval(round(200), round(100))).toMatchObject({ median: 2, n: 1 });
  });

  it('pools accept counts over the rounds and sums failed requests', () => {
    const a = aggregateRounds([
      round(1, {
        spec_verify_steps: 10,
        spec_completion_tokens: 30,
        spec_requests: 2,
        errors: 1,
        error_samples: ['x'],
      }),
      round(2, {
        spec_verify_steps: 30,
        spec_completion_tokens: 50,
        spec_requests: 2,
        errors: 2,
        error_samples: ['y'],
      }),
    ]);
    expect(a.accept_length_pooled).toBe(80 / 40);
    expect(a.errors).toBe(3);
    expect(a.error_samples).toEqual(['x', 'y']);
  });
});

describe('crossover', () => {
  const iv = (median: number, lo: number, hi: number) => ({ median, lo, hi, n: 3, coverage: 0.75 });

  it('interpolates in log concurrency between the levels around the first fall below 1', () => {
    // 1.5 at 10, 0.5 at 1000: halfway in log space is 100.
    const x = crossing([
      { c: 10, s: 1.5 },
      { c: 1000, s: 0.5 },
    ]);
    expect(x.kind).toBe('at');
    expect(x.kind === 'at' && x.at).toBeCloseTo(100, 9);
    expect(crossing([{ c: 1, s: 0.9 }])).toEqual({ kind: 'from-start', first: 1 });
    expect(
      crossing([
        { c: 1, s: 1.2 },
        { c: 4, s: 1.0 },
      ]),
    ).toEqual({ kind: 'never', last: 4 });
  });

  it('gives the interval from the lower and upper ends of the speedup intervals', () => {
    const x = crossover([
      { concurrency: 10, speedup: iv(1.5, 1.2, 1.8) },
      { concurrency: 100, speedup: iv(1.2, 0.8, 1.4) },
      { concurrency: 1000, speedup: iv(0.6, 0.5, 0.9) },
    ])!;
    // median: 1.2 at 100 → 0.6 at 1000, a third of the way: 100 × 10^(1/3)
    expect(x.median.kind === 'at' && x.median.at).toBeCloseTo(100 * 10 ** (1 / 3), 9);
    // lower ends: 1.2 at 10 → 0.8 at 100, halfway: 10^1.5 ≈ 31.6 (shown as 32)
    expect(x.early.kind === 'at' && x.early.at).toBeCloseTo(10 ** 1.5, 9);
    // upper ends: 1.4 at 100 → 0.9 at 1000, 0.4/0.5 of the way
    expect(x.late.kind === 'at' && x.late.at).toBeCloseTo(100 * 10 ** 0.8, 9);
    expect(suggestedMaxRunning(x)).toBe(31);
    expect(verdictLine(x, 'EAGLE3')).toBe(
      'Verdict: EAGLE3 pays up to concurrency ≈ 215 (interval 32 to 631), between the measured levels 100 and 1000; above it the target alone is faster. Suggested: --max-running-requests 31 on the EAGLE3 server, load above it to a server without speculation.',
    );
  });

  it('takes the last fall below 1 that stays below, and names an earlier dip', () => {
    const x = crossover([
      { concurrency: 1, speedup: iv(2.0, 1.8, 2.2) },
      { concurrency: 2, speedup: iv(0.9, 0.5, 1.3) },
      { concurrency: 10, speedup: iv(1.5, 1.2, 1.8) },
      { concurrency: 100, speedup: iv(0.5, 0.4, 0.6) },
    ])!;
    expect(x.median).toMatchObject({ kind: 'at', between: [10, 100] });
    expect(x.dips).toEqual([2]);
    expect(verdictLine(x, 'EAGLE3')).toContain('(below 1× at concurrency 2 too, recovering above it');
  });

  it('says "never within the sweep", and when the top of the sweep is not decided', () => {
    const x = crossover([
      { concurrency: 1, speedup: iv(2.1, 2.0, 2.3) },
      { concurrency: 250, speedup: iv(1.1, 0.95, 1.2) },
    ])!;
    // Lower ends 2.0 at 1 → 0.95 at 250 cross at 250^(1/1.05) ≈ 192.
    expect(verdictLine(x, 'EAGLE3')).toBe(
      'Verdict: EAGLE3 is faster than the target alone at every measured concurrency up to 250: the crossover is never within the sweep (its interval reaches 1× from concurrency 192, so the top of the sweep is not decided).',
    );
    expect(suggestedMaxRunning(x)).toBeNull();
    expect(verdictLine(crossover([{ concurrency: 1, speedup: iv(0.9, 0.8, 0.95) }]), 'EAGLE3')).toMatch(
      /slower than the target alone from the lowest level measured \(concurrency 1\)/,
    );
  });
});

describe('accept lengths', () => {
  const req = (out: number, verify: number, hist?: number[]): RequestResult => ({
    index: 0,
    sentAtMs: 0,
    ttftMs: 1,
    itlsMs: [],
    e2eMs: 10,
    outputTokens: out,
    promptTokens: 1,
    acceptLength: out / verify,
    specVerifyCt: verify,
    specHistogram: hist,
  });

  it('pooled and per-request mean differ when request lengths differ', () => {
    // 100 tokens in 25 steps (4.0) and 10 tokens in 10 steps (1.0): pooled 110/35, mean of means 2.5.
    const f = acceptFigures([req(100, 25, [5, 0, 0, 20]), req(10, 10, [10])]);
    expect(f.accept_length_pooled).toBe(110 / 35);
    expect(f.spec_accept_histogram).toEqual([15, 0, 0, 20]);
    expect(f.accept_per_position).toEqual([20 / 35, 20 / 35, 20 / 35]);
    expect(mergeAcceptFigures([f, f]).accept_length_pooled).toBe(110 / 35);
    expect(acceptFigures([{ ...req(5, 1), specVerifyCt: undefined }]).accept_length_pooled).toBeNull();
  });

  it('per position: share of steps with at least j accepted drafts', () => {
    expect(perPosition([2, 3, 5])).toEqual([0.8, 0.5]);
    expect(perPosition([4])).toBeNull();
  });
});
