// Medians and their confidence intervals over a level's rounds.
//
// Method: the exact distribution-free interval for a median from order statistics. With n
// rounds sorted x(1) ≤ … ≤ x(n), [x(k), x(n+1−k)] covers the true median with probability
// 1 − 2·P(Binomial(n, ½) ≤ k − 1), whatever the distribution of a round's figure. aerie takes
// the narrowest such interval whose coverage reaches TARGET_COVERAGE, or [min, max] with the
// coverage it has when n is too small to reach it (n = 3: 75 %; n = 5: 93.75 %).
// Why not a bootstrap: at the handful of rounds a sweep can afford, resampling 3–5 values
// gives intervals that understate the spread and depend on the RNG; the order-statistic
// interval is exact, deterministic and states its own coverage.

export const TARGET_COVERAGE = 0.9;

export interface Interval {
  /** numpy's median (mean of the two middle values for an even count). */
  median: number;
  lo: number;
  hi: number;
  /** Values it was taken over. */
  n: number;
  /** Probability the interval holds the true median; 0 for one value (no interval). */
  coverage: number;
}

/** P(Binomial(n, ½) ≤ k), exactly for the n a sweep uses. */
export function binomialHalfCdf(n: number, k: number): number {
  if (k < 0) return 0;
  let term = 1; // C(n, 0)
  let sum = 0;
  for (let i = 0; i <= Math.min(k, n); i++) {
    sum += term;
    term = (term * (n - i)) / (i + 1);
  }
  return sum / 2 ** n;
}

export function medianOf(sorted: readonly number[]): number {
  const n = sorted.length;
  const mid = Math.floor(n / 2);
  return n % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Median and order-statistic interval of finite values; null when there are none. */
export function medianInterval(values: readonly number[], target = TARGET_COVERAGE): Interval | null {
  const xs = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  const n = xs.length;
  if (n === 0) return null;
  const median = medianOf(xs);
  if (n === 1) return { median, lo: median, hi: median, n, coverage: 0 };
  let k = 1;
  while (k + 1 <= Math.floor(n / 2) && 1 - 2 * binomialHalfCdf(n, k) >= target) k++;
  return { median, lo: xs[k - 1]!, hi: xs[n - k]!, n, coverage: 1 - 2 * binomialHalfCdf(n, k - 1) };
}

export type Verdict = 'above' | 'below' | 'undecided';

/** Which side of `threshold` the interval lies on; undecided when it straddles it or has one value. */
export function verdict(i: Interval | null, threshold = 1): Verdict {
  if (!i || i.n < 2) return 'undecided';
  if (i.lo > threshold) return 'above';
  if (i.hi < threshold) return 'below';
  return 'undecided';
}

/** "2.10× [1.95–2.21]" style text: the median and, with two or more values, the interval. */
export function formatInterval(i: Interval | null | undefined, digits: number, suffix = ''): string {
  if (!i) return '—';
  const m = `${i.median.toFixed(digits)}${suffix}`;
  if (i.n < 2) return m;
  return `${m} [${i.lo.toFixed(digits)}–${i.hi.toFixed(digits)}]`;
}
