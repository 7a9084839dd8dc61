/**
 * The latency model: what one scheduler step costs, in unscaled milliseconds, for an
 * 8B-class target on one H100. Pure, so the speedup curve can be checked without a server.
 *
 * Plain decode: base + (kv + compute) per running request.
 * Speculative decode: numSteps draft forwards (each reads topk branches per request),
 * then one target verify over numDraftTokens tokens per request. Verifying extra tokens
 * is cheaper than decoding extra requests (the KV is read once per request), which is why
 * speculation wins big at batch 1 and barely at batch 250.
 */

export interface LatencyParams {
  /** Fixed cost of one target forward (kernel launches, lm_head, sampling). */
  baseMs: number;
  /** Per running request: reading its KV cache. */
  perReqMs: number;
  /** Per token pushed through the target (MLP/attention compute). */
  perTokenMs: number;
  /** Fixed cost of one draft forward (a one-layer model). */
  draftBaseMs: number;
  /** Per draft token (request x topk branch) in one draft forward. */
  draftPerTokenMs: number;
  /** Prefill: fixed cost per batch and per new (uncached) token. */
  prefillBaseMs: number;
  prefillPerTokenMs: number;
  /** Multiplier on a step that runs without a captured CUDA graph. */
  eagerFactor: number;
}

export const H100_8B: LatencyParams = {
  baseMs: 7,
  perReqMs: 0.06,
  perTokenMs: 0.02,
  draftBaseMs: 0.35,
  draftPerTokenMs: 0.002,
  prefillBaseMs: 2,
  prefillPerTokenMs: 0.03,
  eagerFactor: 1.25,
};

export interface SpecShape {
  numSteps: number;
  topk: number;
  numDraftTokens: number;
}

export function decodeStepMs(
  batch: number,
  spec: SpecShape | null,
  cudaGraph: boolean,
  p: LatencyParams = H100_8B,
): number {
  if (batch <= 0) return 0;
  let ms: number;
  if (!spec) {
    ms = p.baseMs + (p.perReqMs + p.perTokenMs) * batch;
  } else {
    const draft = spec.numSteps * (p.draftBaseMs + p.draftPerTokenMs * batch * spec.topk);
    const verify = p.baseMs + p.perReqMs * batch + p.perTokenMs * batch * spec.numDraftTokens;
    ms = draft + verify;
  }
  return cudaGraph ? ms : ms * p.eagerFactor;
}

export function prefillMs(newTokens: number, spec: SpecShape | null, p: LatencyParams = H100_8B): number {
  const target = p.prefillBaseMs + p.prefillPerTokenMs * newTokens;
  // The drafter runs its own extend over the same tokens (one small layer).
  const draft = spec ? p.draftBaseMs + (p.prefillPerTokenMs / 10) * newTokens : 0;
  return target + draft;
}

/** Steady-state output tokens/s of `batch` always-busy requests with a given mean accept length. */
export function steadyThroughput(
  batch: number,
  spec: SpecShape | null,
  acceptLength: number,
  cudaGraph = true,
  p: LatencyParams = H100_8B,
): number {
  const perStep = spec ? acceptLength : 1;
  return (batch * perStep * 1000) / decodeStepMs(batch, spec, cudaGraph, p);
}

/**
 * Accept-length draws: each draft token is accepted with probability q until the first
 * rejection (a chain), so one verify yields 1 + (accepted drafts) tokens, at most cap.
 * E[len] = (1 - q^cap) / (1 - q); q is solved so the mean equals the drafter quality.
 */
export function chainAcceptProbability(meanLength: number, cap: number): number {
  if (cap <= 1 || meanLength <= 1) return 0;
  if (meanLength >= cap) return 1;
  const mean = (q: number) => (q >= 1 ? cap : (1 - q ** cap) / (1 - q));
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (mean(mid) < meanLength) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** One verify's token yield (bonus token included), from a uniform draw source. */
export function drawAcceptLength(q: number, cap: number, rand: () => number): number {
  let len = 1;
  while (len < cap && rand() < q) len++;
  return len;
}
