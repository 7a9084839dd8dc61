// A level measured in R rounds (the same concurrency, a fresh set of prompts each round, the
// same sets for both variants): one noisy round no longer reads as a regression. The level's
// record is its median round's bench_serving line (by output throughput; the lower middle for
// an even R), so every bench_serving key still describes one real measurement, plus:
//   rounds       each round's headline figures, from which the report takes medians and
//                intervals (stats.ts), and speedup's interval from the paired rounds
//   accept lengths, per-position acceptance and categories pooled over every round
//   errors       failed requests over every round (error_samples likewise)
// A record written before rounds existed has no `rounds`: it reads as one round.

import { mergeAcceptFigures } from './accept.js';
import { mergeCategories, type CategoryFigures } from './categories.js';
import type { BenchServingRecord, RoundFigures } from './record.js';

export type { RoundFigures } from './record.js';
import { medianInterval, type Interval } from './stats.js';

/** How many rounds a level runs unless stages.benchmark.rounds says otherwise. */
export const DEFAULT_ROUNDS = 3;

/** A record's figures that a round keeps (records from before definitions 3 lack some: null). */
export function roundFigures(r: BenchServingRecord, round: number): RoundFigures {
  return {
    round,
    started_at: r.started_at,
    duration: r.duration,
    completed: r.completed,
    errors: r.errors ?? 0,
    output_throughput: r.output_throughput,
    request_throughput: r.request_throughput,
    median_ttft_ms: r.median_ttft_ms,
    p99_ttft_ms: r.p99_ttft_ms,
    median_itl_ms: r.median_itl_ms,
    p99_itl_ms: r.p99_itl_ms,
    mean_tpot_ms: r.mean_tpot_ms,
    accept_length: r.accept_length ?? null,
    accept_length_pooled: r.accept_length_pooled ?? null,
    mean_accept_length_per_request: r.mean_accept_length_per_request ?? null,
    spec_verify_steps: r.spec_verify_steps ?? null,
    spec_completion_tokens: r.spec_completion_tokens ?? null,
    spec_requests: r.spec_requests ?? null,
    spec_accept_histogram: r.spec_accept_histogram ?? null,
    categories: r.categories ?? null,
  };
}

/** The index of the median round by output throughput (lower middle for an even count, ties by round order). */
export function medianRoundIndex(records: readonly BenchServingRecord[]): number {
  const order = records.map((r, i) => ({ i, v: r.output_throughput })).sort((a, b) => a.v - b.v || a.i - b.i);
  return order[Math.floor((order.length - 1) / 2)]!.i;
}

/** The level's record from its rounds, in round order. */
export function aggregateRounds(records: readonly BenchServingRecord[]): BenchServingRecord {
  if (records.length === 0) throw new Error('aggregateRounds: no rounds');
  const median = records[medianRoundIndex(records)]!;
  const rounds = records.map(roundFigures);
  let weighted = 0;
  let weight = 0;
  for (const r of rounds) {
    if (r.mean_accept_length_per_request === null) continue;
    const w = r.spec_requests ?? r.completed;
    weighted += r.mean_accept_length_per_request * w;
    weight += w;
  }
  const samples = [...new Set(records.flatMap((r) => r.error_samples ?? []))].slice(0, 5);
  return {
    ...median,
    errors: rounds.reduce((a, r) => a + r.errors, 0),
    error_samples: samples,
    mean_accept_length_per_request: weight > 0 ? weighted / weight : null,
    ...mergeAcceptFigures(records),
    categories: mergeCategories(records.map((r) => r.categories)),
    rounds,
  };
}

/** The rounds a record stands for: its own, or itself as the one round of an older record. */
export function roundsOf(r: BenchServingRecord): RoundFigures[] {
  return r.rounds && r.rounds.length > 0 ? r.rounds : [roundFigures(r, 0)];
}

/** Requests sent over every round of a level (completed + failed). */
export function requestsOf(r: BenchServingRecord): number {
  return roundsOf(r).reduce((a, x) => a + x.completed + x.errors, 0);
}

export type RoundMetric = 'output_throughput' | 'p99_ttft_ms' | 'p99_itl_ms' | 'median_ttft_ms' | 'median_itl_ms';

export function metricInterval(r: BenchServingRecord | undefined, metric: RoundMetric): Interval | null {
  if (!r) return null;
  return medianInterval(roundsOf(r).map((x) => x[metric]));
}

/**
 * Speedup from the paired rounds: round i of the drafter against round i of the baseline (the
 * same prompts), so the interval reflects the spread of the ratio itself, not of two means.
 */
export function speedupInterval(
  speculative: BenchServingRecord | undefined,
  baseline: BenchServingRecord | undefined,
): Interval | null {
  if (!speculative || !baseline) return null;
  const s = roundsOf(speculative);
  const b = roundsOf(baseline);
  const ratios: number[] = [];
  for (const x of s) {
    const y = b.find((r) => r.round === x.round);
    if (y && y.output_throughput > 0) ratios.push(x.output_throughput / y.output_throughput);
  }
  return medianInterval(ratios);
}
