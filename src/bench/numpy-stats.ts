// The summary statistics bench_serving writes, computed with numpy's definitions so a
// figure aerie writes under one of bench_serving's names means what bench_serving's does.
//
//   mean          np.mean;   median  np.median (the mean of the two middle values for an even count)
//   std           np.std (population, ddof=0)
//   pXX           np.percentile(values, XX) with numpy's default method 'linear': sort,
//                 rank = XX/100 · (n − 1), interpolate linearly between the values at
//                 floor(rank) and ceil(rank)
//   max           np.max
//   empty input   0 for every figure, as bench_serving's `np.percentile(x or 0, p)` gives
//
// bench_serving computes every percentile this way in each release aerie follows:
// sglang==0.5.4:sglang/bench_serving.py:1664-1683, sglang==0.5.9:sglang/bench_serving.py:2233-2252,
// sglang==0.5.12:sglang/bench_serving.py:1110-1130, sglang==0.5.23:sglang/benchmark/serving.py:1279-1305.

export interface Distribution {
  count: number;
  mean: number;
  std: number;
  median: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

/** One line, printed next to every percentile figure aerie reports. */
export const PERCENTILE_DEFINITION =
  "median, p90, p95, p99 = numpy.percentile(values, p) with numpy's default 'linear' method (rank p/100 · (n − 1), " +
  'linear between the two nearest values), as bench_serving computes them; the median of an even count is the mean of the two middle values';

const EMPTY: Distribution = { count: 0, mean: 0, std: 0, median: 0, p90: 0, p95: 0, p99: 0, max: 0 };

/** numpy.percentile(sorted, p) for an ascending, non-empty array, method 'linear'. */
export function percentileOfSorted(sorted: ArrayLike<number>, p: number): number {
  const n = sorted.length;
  if (n === 0) return 0;
  // numpy's virtual index for 'linear', (n − 1)·q with q = p / 100, in its order of operations
  // so the last digit matches.
  const rank = (n - 1) * (p / 100);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, n - 1);
  const frac = rank - lo;
  const a = sorted[lo]!;
  const b = sorted[hi]!;
  // numpy's _lerp: a + (b − a)·t, switched to b − (b − a)·(1 − t) for t ≥ 0.5, so the
  // ends are exact and the last digit matches numpy's.
  const diff = b - a;
  return frac >= 0.5 ? b - diff * (1 - frac) : a + diff * frac;
}

/** numpy.percentile(values, p), method 'linear'; 0 for no values. */
export function percentile(values: readonly number[], p: number): number {
  return percentileOfSorted(sortedCopy(values), p);
}

export function distribution(values: readonly number[]): Distribution {
  const n = values.length;
  if (n === 0) return { ...EMPTY };
  const sorted = sortedCopy(values);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += sorted[i]!;
  const mean = sum / n;
  let sq = 0;
  for (let i = 0; i < n; i++) sq += (sorted[i]! - mean) * (sorted[i]! - mean);
  const at = (p: number): number => percentileOfSorted(sorted, p);
  return {
    count: n,
    mean,
    std: Math.sqrt(sq / n),
    median: medianOfSorted(sorted),
    p90: at(90),
    p95: at(95),
    p99: at(99),
    max: sorted[n - 1]!,
  };
}

/** np.median: the middle value, or np.mean of the two middle values (not the lerp at 0.5, which can differ in the last digit). */
export function medianOfSorted(sorted: ArrayLike<number>): number {
  const n = sorted.length;
  if (n === 0) return 0;
  const h = n >> 1;
  return n % 2 === 1 ? sorted[h]! : (sorted[h - 1]! + sorted[h]!) / 2;
}

function sortedCopy(values: readonly number[]): Float64Array {
  // A typed array sorts numerically and without boxing: ITLs pooled over a level can be
  // hundreds of thousands of values.
  const a = Float64Array.from(values);
  a.sort();
  return a;
}
