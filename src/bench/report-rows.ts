// The report's rows: speculative and baseline records paired by concurrency, and the figures
// every part of the report (tables, summary, per-category and extra sections) reads off a row.

import type { RunCost } from './cost.js';
import type { BenchServingRecord } from './record.js';
import { speedupInterval } from './rounds.js';
import type { Interval } from './stats.js';

export const DASH = '—';

export interface ReportInput {
  title: string;
  baseline?: BenchServingRecord[];
  speculative: BenchServingRecord[];
  notes?: string[];
  /** Column label for the speculative runs. Default "EAGLE3". */
  speculativeLabel?: string;
  /** How the numbers were taken (dataset, lengths, api, driver), one line each. */
  settings?: string[];
  /** What each stage cost (cost.ts), for the report's cost section; absent when unknown. */
  cost?: RunCost;
  /** "aerie-sim 0.5.23" when the servers said they were the simulator (simulated.ts); else absent. */
  simulated?: string;
}

export interface ReportRow {
  concurrency: number | null;
  baseline?: BenchServingRecord;
  speculative?: BenchServingRecord;
}

/** Pair records by max_concurrency, ascending; a level present on one side only still gets a row. */
export function pairByConcurrency(input: Pick<ReportInput, 'baseline' | 'speculative'>): ReportRow[] {
  const rows = new Map<number | null, ReportRow>();
  const row = (c: number | null): ReportRow => {
    let r = rows.get(c);
    if (!r) rows.set(c, (r = { concurrency: c }));
    return r;
  };
  for (const b of input.baseline ?? []) row(b.max_concurrency).baseline = b;
  for (const s of input.speculative) row(s.max_concurrency).speculative = s;
  return [...rows.values()].sort((a, b) => (a.concurrency ?? Infinity) - (b.concurrency ?? Infinity));
}

/** Median over the paired rounds of speculative ÷ baseline output throughput, with its interval. */
export function speedupOf(row: ReportRow): Interval | null {
  return speedupInterval(row.speculative, row.baseline);
}

/** The median paired speedup; undefined when either side is missing or zero. */
export function speedup(row: ReportRow): number | undefined {
  return speedupOf(row)?.median;
}

/** Pooled accept length (Σ tokens ÷ Σ verify steps), else the server's own pooled running average. */
export function pooledAcceptLength(r: BenchServingRecord | undefined): number | undefined {
  if (!r) return undefined;
  return r.accept_length_pooled ?? r.accept_length ?? undefined;
}

/** Per-request meta_info mean first (flush-proof), else the server's running average. */
export function reportedAcceptLength(r: BenchServingRecord | undefined): number | undefined {
  if (!r) return undefined;
  return r.mean_accept_length_per_request ?? r.accept_length ?? undefined;
}

/** A figure to `digits` places, or a dash for none. */
export const fixed = (v: number | undefined | null, digits: number): string =>
  v === undefined || v === null || !Number.isFinite(v) ? DASH : v.toFixed(digits);
