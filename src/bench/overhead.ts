// Is the client the bottleneck? Figures from one measured level against a server that
// reports its own per-request latency (meta_info.e2e_latency): whatever the client
// measured beyond that is time spent in the network stack and in aerie's own event loop.

import { distribution, type Distribution } from './metrics.js';
import type { LevelRun } from './types.js';

export interface OverheadFigures {
  requests: number;
  failed: number;
  /** Requests whose server did not report e2e_latency (left out of the overhead). */
  unreported: number;
  /** Client-measured E2E minus server-reported E2E, per request (ms). */
  overheadMs: Distribution;
  targetConcurrency: number;
  /** bench_serving's concurrency: Σ E2E / duration. */
  achievedConcurrency: number;
  achievedRatio: number;
  maxInFlight: number;
  outputTokens: number;
  outputThroughput: number;
  durationS: number;
}

export function overheadFigures(run: LevelRun): OverheadFigures {
  const ok = run.results.filter((r) => r.error === undefined);
  const gaps: number[] = [];
  let unreported = 0;
  let sumE2e = 0;
  let tokens = 0;
  for (const r of ok) {
    sumE2e += r.e2eMs;
    tokens += r.outputTokens;
    if (r.serverE2eMs === undefined) unreported++;
    // Clocks differ by a few µs between processes; a negative gap is measurement noise.
    else gaps.push(Math.max(0, r.e2eMs - r.serverE2eMs));
  }
  const achieved = run.durationMs > 0 ? sumE2e / run.durationMs : 0;
  return {
    requests: run.results.length,
    failed: run.results.length - ok.length,
    unreported,
    overheadMs: distribution(gaps),
    targetConcurrency: run.concurrency,
    achievedConcurrency: achieved,
    achievedRatio: run.concurrency > 0 ? achieved / run.concurrency : 0,
    maxInFlight: run.maxInFlight,
    outputTokens: tokens,
    outputThroughput: run.durationMs > 0 ? tokens / (run.durationMs / 1000) : 0,
    durationS: run.durationMs / 1000,
  };
}
