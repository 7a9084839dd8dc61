// Where speculation stops paying: the concurrency at which the drafter's output throughput
// falls to the target alone's (speedup 1×) for good, between the last level at or above 1×
// and the next one (every level above it is below 1×); a dip below 1× that recovers at a higher
// level is reported as noise, not taken as the crossover. Levels are log-spaced (1, 2, 5, 10, 30, …), so the interpolation is
// linear in log(concurrency), the axis the report's charts draw.
//
// Its interval comes from the speedup intervals (stats.ts, paired rounds): the curve of lower
// ends crosses 1× first (the earliest the crossover can be), the curve of upper ends last.

import type { Interval } from './stats.js';

export interface SpeedupPoint {
  concurrency: number;
  speedup: Interval;
}

/** Where a curve goes from ≥ 1 to < 1 and stays below. */
export type Crossing =
  | { kind: 'at'; at: number; between: [number, number] }
  /** Below 1 at the lowest level already. */
  | { kind: 'from-start'; first: number }
  /** Never below 1 within the sweep. */
  | { kind: 'never'; last: number };

export interface Crossover {
  median: Crossing;
  /** The lower-end curve's crossing: the earliest the crossover can be. */
  early: Crossing;
  /** The upper-end curve's crossing: the latest. */
  late: Crossing;
  /** Levels below the crossing where the median speedup dipped under 1× and recovered (noise or a real dip). */
  dips: number[];
}

export function crossing(points: readonly { c: number; s: number }[]): Crossing {
  const ps = [...points].sort((a, b) => a.c - b.c);
  if (ps.length === 0) throw new Error('crossing: no points');
  let i = ps.length - 1;
  while (i >= 0 && ps[i]!.s < 1) i--;
  if (i === ps.length - 1) return { kind: 'never', last: ps[i]!.c };
  if (i < 0) return { kind: 'from-start', first: ps[0]!.c };
  const a = ps[i]!;
  const b = ps[i + 1]!;
  const t = (a.s - 1) / (a.s - b.s);
  const at = Math.exp(Math.log(a.c) + t * (Math.log(b.c) - Math.log(a.c)));
  return { kind: 'at', at, between: [a.c, b.c] };
}

/** The crossover of a sweep's speedups; null without any level measured on both sides. */
export function crossover(points: readonly SpeedupPoint[]): Crossover | null {
  const ps = [...points].sort((a, b) => a.concurrency - b.concurrency);
  if (ps.length === 0) return null;
  const median = crossing(ps.map((p) => ({ c: p.concurrency, s: p.speedup.median })));
  const below = median.kind === 'at' ? median.between[0] : median.kind === 'never' ? Infinity : -Infinity;
  const dips = ps.filter((p) => p.concurrency < below && p.speedup.median < 1).map((p) => p.concurrency);
  return {
    median,
    early: crossing(ps.map((p) => ({ c: p.concurrency, s: p.speedup.lo }))),
    late: crossing(ps.map((p) => ({ c: p.concurrency, s: p.speedup.hi }))),
    dips,
  };
}

const round = (c: number): string => (c >= 10 ? c.toFixed(0) : c.toFixed(1));

function bound(c: Crossing): string {
  if (c.kind === 'at') return round(c.at);
  if (c.kind === 'from-start') return `≤ ${c.first}`;
  return `> ${c.last}`;
}

/** "≈ 37 (interval 24–62)" text of a crossover that happens; the interval left out when it is a point. */
export function crossoverRange(x: Crossover): string {
  if (x.median.kind !== 'at') return '';
  const lo = bound(x.early);
  const hi = bound(x.late);
  const at = round(x.median.at);
  return lo === at && hi === at ? `≈ ${at}` : `≈ ${at} (interval ${lo} to ${hi})`;
}

/**
 * The batch cap that keeps the drafter where it pays: the crossover's lower end, rounded down.
 * SGLang has no switch that turns speculation off above a batch size (none among 0.5.23's
 * --speculative-* flags, sglang==0.5.23:srt/server_args.py), so the cap is --max-running-requests
 * on the speculative server, with load above it sent to a server without speculation.
 */
export function suggestedMaxRunning(x: Crossover): number | null {
  if (x.median.kind !== 'at') return null;
  const lo = x.early.kind === 'at' ? x.early.at : x.median.at;
  return Math.max(1, Math.floor(Math.min(lo, x.median.at)));
}

/** The report's first line. */
export function verdictLine(x: Crossover | null, label: string): string {
  if (!x) return `Verdict: no baseline was measured, so there is no crossover: ${label} alone was benchmarked.`;
  const m = x.median;
  if (m.kind === 'from-start')
    return `Verdict: ${label} is slower than the target alone from the lowest level measured (concurrency ${m.first}): at these settings it does not pay.`;
  const dips =
    x.dips.length > 0
      ? ` (below 1× at concurrency ${x.dips.join(', ')} too, recovering above it: see the intervals there)`
      : '';
  if (m.kind === 'never') {
    const caveat =
      x.early.kind === 'never'
        ? ''
        : ` (its interval reaches 1× from concurrency ${x.early.kind === 'at' ? round(x.early.at) : x.early.first}, so the top of the sweep is not decided)`;
    if (x.dips.length > 0)
      return `Verdict: ${label} is faster than the target alone at the top of the sweep (concurrency ${m.last}): the crossover is never within the sweep${dips}${caveat}.`;
    return `Verdict: ${label} is faster than the target alone at every measured concurrency up to ${m.last}: the crossover is never within the sweep${caveat}.`;
  }
  const cap = suggestedMaxRunning(x);
  return (
    `Verdict: ${label} pays up to concurrency ${crossoverRange(x)}, between the measured levels ${m.between[0]} and ${m.between[1]}; ` +
    `above it the target alone is faster${dips}. Suggested: --max-running-requests ${cap} on the ${label} server, load above it to a server without speculation.`
  );
}
