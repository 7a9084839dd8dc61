/**
 * The latency model: what one scheduler step costs, in unscaled milliseconds, for an
 * 8B-class target (Llama-3.1-8B, BF16) on one H100. Pure, so the speedup curve can be checked
 * without a server (test/sim/sglang-speed.test.ts).
 *
 * A target forward is a roofline: fixed overhead + the larger of reading the weights and the
 * running requests' KV cache (memory-bound) and computing over every token in the batch
 * (compute-bound). Plain decode pushes one token per request; an EAGLE-3 verify pushes
 * num-draft-tokens per request, so it turns compute-bound at a quarter of the batch (3/1/4)
 * and from there the drafter's extra tokens cost real time: speculation wins big at batch 1
 * and loses at high concurrency, where verification dominates. The draft forwards (one small
 * layer plus the lm_head) add a fixed cost per step.
 *
 * The constants are set so the curve follows the published shapes:
 *   - batch 1, plain: 158.34 tok/s for Llama-3.1-8B on 1×H100 under SGLang (EAGLE-3 paper,
 *     arXiv 2503.01840 v3, the SGLang throughput table, MT-bench; also SGLang's docs), i.e.
 *     6.32 ms per step: overheadMs + weightsMs + kvPerReqMs.
 *   - batch 1, EAGLE-3 3/1/4: speedup ≈ 0.73 × accept length: SpecBundle's Llama-3.1-8B-Instruct
 *     drafter, steps 3, topk 1, draft tokens 4, batch 1: mtbench 2.13× at 2.90, humaneval 2.44×
 *     at 3.34, math500 2.58× at 3.48, gsm8k 1.77× at 2.55 (SpecForge@a6b6b023:docs/spec_bundle/public/raw_data/data.json,
 *     "Llama-3.1-8B-Instruct"), which sets draftStepMs: at accept 2.9 the model gives 2.2×
 *     (the paper's 373.25 / 158.34 = 2.36× at batch 1 is the same range).
 *   - batch 64: the paper's "1.38x throughput improvement at a batch size of 64" in SGLang
 *     (arXiv 2503.01840 v3, abstract); the model gives 1.36× at accept 2.7, 1.46× at 2.9 (3/1/4).
 *   - high concurrency: below 1× once the verify is compute-bound (perTokenMs: 2 × 8 GFLOP per
 *     token at ~400 TFLOP/s effective BF16 ≈ 0.04 ms): 0.88× at 250 for accept 2.7; the
 *     crossover falls at concurrency ~153 (accept 2.7) to ~197 (accept 2.9).
 */

export interface LatencyParams {
  /** Fixed cost of one target forward (kernel launches, sampling, scheduling). */
  overheadMs: number;
  /** Reading the target's weights once (16 GB at ~3.35 TB/s, less what overlaps). */
  weightsMs: number;
  /** Per running request: reading its KV cache. */
  kvPerReqMs: number;
  /** Per token pushed through the target: the compute-bound cost. */
  perTokenMs: number;
  /** Fixed cost of one draft forward (a one-layer model and the lm_head). */
  draftStepMs: number;
  /** Per draft token (request × topk branch) in one draft forward. */
  draftPerTokenMs: number;
  /** Prefill: fixed cost per batch and per new (uncached) token. */
  prefillBaseMs: number;
  prefillPerTokenMs: number;
  /** Multiplier on a step that runs without a captured CUDA graph. */
  eagerFactor: number;
}

export const H100_8B: LatencyParams = {
  overheadMs: 1.3,
  weightsMs: 5.0,
  kvPerReqMs: 0.02,
  perTokenMs: 0.04,
  draftStepMs: 0.65,
  draftPerTokenMs: 0.004,
  prefillBaseMs: 2,
  prefillPerTokenMs: 0.03,
  eagerFactor: 1.25,
};

export interface SpecShape {
  numSteps: number;
  topk: number;
  numDraftTokens: number;
}

/**
 * One target forward over `tokens` tokens of `batch` requests (the roofline above). The max is
 * a smooth one (the 2-norm of the memory and compute times): real kernels overlap the two only
 * in part, so the turn from memory- to compute-bound is gradual, as the measured curves are.
 */
export function targetForwardMs(batch: number, tokens: number, p: LatencyParams = H100_8B): number {
  return p.overheadMs + Math.hypot(p.weightsMs + p.kvPerReqMs * batch, p.perTokenMs * tokens);
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
    ms = targetForwardMs(batch, batch, p);
  } else {
    const draft = spec.numSteps * (p.draftStepMs + p.draftPerTokenMs * batch * spec.topk);
    ms = draft + targetForwardMs(batch, batch * spec.numDraftTokens, p);
  }
  return cudaGraph ? ms : ms * p.eagerFactor;
}

export function prefillMs(newTokens: number, spec: SpecShape | null, p: LatencyParams = H100_8B): number {
  const target = p.prefillBaseMs + p.prefillPerTokenMs * newTokens;
  // The drafter runs its own extend over the same tokens (one small layer).
  const draft = spec ? p.draftStepMs + (p.prefillPerTokenMs / 10) * newTokens : 0;
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
