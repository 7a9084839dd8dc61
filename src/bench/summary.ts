// The verdict of a report, derived from its records alone (so a report re-rendered from an
// older results.jsonl, and `aerie compare`, reach the same one): the crossover, the first
// line, the SIMULATED label, per-category figures, and the summary kept in the run's result.

import { mergeCategories, type CategoryFigures } from './categories.js';
import type { RunCost } from './cost.js';
import { crossover, suggestedMaxRunning, verdictLine, type Crossover, type SpeedupPoint } from './crossover.js';
import type { BenchServingRecord } from './metrics.js';
import {
  pairByConcurrency,
  pooledAcceptLength,
  reportedAcceptLength,
  speedupOf,
  type ReportInput,
} from './report-rows.js';
import { SIMULATED_LABEL } from './simulated.js';
import type { Interval } from './stats.js';

export function speedupPoints(input: Pick<ReportInput, 'baseline' | 'speculative'>): SpeedupPoint[] {
  const out: SpeedupPoint[] = [];
  for (const r of pairByConcurrency(input)) {
    const s = speedupOf(r);
    if (s && r.concurrency !== null) out.push({ concurrency: r.concurrency, speedup: s });
  }
  return out;
}

export function reportCrossover(input: Pick<ReportInput, 'baseline' | 'speculative'>): Crossover | null {
  return crossover(speedupPoints(input));
}

/** What the servers said they were, when any record says the simulator. */
export function simulatedOf(input: Pick<ReportInput, 'baseline' | 'speculative' | 'simulated'>): string | undefined {
  if (input.simulated) return input.simulated;
  for (const r of [...input.speculative, ...(input.baseline ?? [])]) if (r.server_simulated) return r.server_simulated;
  return undefined;
}

/** The title as shown: led by SIMULATED when the servers were the simulator. */
export function displayTitle(input: Pick<ReportInput, 'title' | 'baseline' | 'speculative' | 'simulated'>): string {
  const sim = simulatedOf(input);
  return sim ? `${SIMULATED_LABEL} (${sim}, not a GPU measurement): ${input.title}` : input.title;
}

export function firstLine(input: ReportInput): string {
  return verdictLine(reportCrossover(input), input.speculativeLabel ?? 'EAGLE3');
}

export interface CategoryRow {
  concurrency: number;
  category: string;
  requests: number;
  acceptPooled: number | null;
  acceptPerRequest: number | null;
  /** baseline mean TPOT ÷ speculative mean TPOT over the category's requests (categories.ts). */
  speedup: number | null;
}

function byName(cs: readonly CategoryFigures[] | null | undefined): Map<string, CategoryFigures> {
  return new Map((cs ?? []).map((c) => [c.category, c]));
}

/** Per level and category; empty when no record carries categories. */
export function categoryRows(input: Pick<ReportInput, 'baseline' | 'speculative'>): CategoryRow[] {
  const out: CategoryRow[] = [];
  for (const r of pairByConcurrency(input)) {
    if (r.concurrency === null || !r.speculative?.categories) continue;
    const base = byName(r.baseline?.categories);
    for (const c of r.speculative.categories) {
      const b = base.get(c.category);
      const sp = b?.mean_tpot_ms && c.mean_tpot_ms ? b.mean_tpot_ms / c.mean_tpot_ms : null;
      out.push({
        concurrency: r.concurrency,
        category: c.category,
        requests: c.requests,
        acceptPooled: c.accept_length_pooled,
        acceptPerRequest: c.mean_accept_length_per_request,
        speedup: sp,
      });
    }
  }
  return out;
}

/** Every level's categories pooled: the per-domain accept length over the whole sweep. */
export function categoryTotals(records: readonly BenchServingRecord[]): CategoryFigures[] | null {
  return mergeCategories(records.map((r) => r.categories));
}

export interface LevelSummary {
  concurrency: number;
  speedup: Interval | null;
  acceptPooled: number | null;
  acceptPerRequest: number | null;
}

/** What a run's result keeps of its report, for `aerie status` and `aerie compare`. */
export interface RunSummary {
  verdict: string;
  crossover: Crossover | null;
  suggestedMaxRunningRequests: number | null;
  simulated: string | null;
  levels: LevelSummary[];
  cost: RunCost | null;
}

export function runSummary(input: ReportInput): RunSummary {
  const x = reportCrossover(input);
  return {
    verdict: verdictLine(x, input.speculativeLabel ?? 'EAGLE3'),
    crossover: x,
    suggestedMaxRunningRequests: x ? suggestedMaxRunning(x) : null,
    simulated: simulatedOf(input) ?? null,
    levels: pairByConcurrency(input)
      .filter((r): r is typeof r & { concurrency: number } => r.concurrency !== null)
      .map((r) => ({
        concurrency: r.concurrency,
        speedup: speedupOf(r),
        acceptPooled: pooledAcceptLength(r.speculative) ?? null,
        acceptPerRequest: reportedAcceptLength(r.speculative) ?? null,
      })),
    cost: input.cost ?? null,
  };
}
