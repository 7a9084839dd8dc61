// Accept length two ways, because they answer different questions and can disagree in sign
// when two drafters are compared (vllm#42508):
//
//   pooled            Σ completion tokens ÷ Σ verify steps over every speculative request of the
//                     level: tokens per target forward, what throughput follows. vLLM and SGLang's
//                     own server average pool this way (SGLang: total accepted tokens ÷ total
//                     forward count, sglang==0.5.23:srt/managers/scheduler_components/internal_state.py:245-252).
//   per-request mean  the mean of each request's meta_info.spec_accept_length, SpecForge's and
//                     aerie's earlier figure: every request weighs the same, long or short.
//
// A request's own accept length is SGLang's completion_tokens ÷ spec_verify_ct (bonus token
// included; sglang==0.5.9:srt/managers/tokenizer_manager.py:1852, 0.5.12 :2131, 0.5.23 :3166),
// so the pooled figure sums the same two counts the server divides.
//
// Per position: from 0.5.9 SGLang's meta_info carries a histogram of verify steps by number of
// accepted drafts (bonus excluded): spec_accept_histogram (sglang==0.5.9:srt/managers/tokenizer_manager.py:1865),
// renamed spec_correct_drafts_histogram with the old name kept as an alias in 0.5.12
// (sglang==0.5.12:srt/managers/tokenizer_manager.py:2149-2153), only the new name in 0.5.23
// (sglang==0.5.23:srt/managers/tokenizer_manager.py:3199; bins per sglang==0.5.23:srt/managers/schedule_batch.py:1374-1377).
// 0.5.4 reports none. From the pooled histogram, position j's figure is the share of verify
// steps that accepted at least j drafts (the EAGLE papers' per-position acceptance, cumulative).

import type { RequestResult } from './types.js';

export interface AcceptFigures {
  /** Σ completion tokens ÷ Σ spec_verify_ct over the speculative requests; null without any. */
  accept_length_pooled: number | null;
  /** Σ spec_verify_ct (target verify forwards). */
  spec_verify_steps: number | null;
  /** Σ completion tokens of the requests that reported verify steps. */
  spec_completion_tokens: number | null;
  /** Requests that reported verify steps (the per-request mean's denominator). */
  spec_requests: number | null;
  /** Σ of the per-request histograms: [k] = verify steps that accepted k drafts; null when the server reports none. */
  spec_accept_histogram: number[] | null;
  /** [j-1] = share of verify steps that accepted at least j drafts, j = 1..; null without a histogram. */
  accept_per_position: number[] | null;
}

export const NO_ACCEPT: AcceptFigures = {
  accept_length_pooled: null,
  spec_verify_steps: null,
  spec_completion_tokens: null,
  spec_requests: null,
  spec_accept_histogram: null,
  accept_per_position: null,
};

/** The histogram a final meta_info carries, under whichever name the release uses. */
export function histogramOf(meta: Record<string, unknown> | undefined): number[] | undefined {
  if (!meta) return undefined;
  const h = meta.spec_correct_drafts_histogram ?? meta.spec_accept_histogram;
  if (!Array.isArray(h) || h.length === 0 || !h.every((v) => typeof v === 'number' && Number.isFinite(v)))
    return undefined;
  return h as number[];
}

export function addHistograms(a: readonly number[] | null, b: readonly number[]): number[] {
  const out = [...(a ?? [])];
  for (const [k, v] of b.entries()) out[k] = (out[k] ?? 0) + v;
  return out;
}

/** Share of steps with at least j accepted drafts, j = 1..(bins − 1). */
export function perPosition(hist: readonly number[]): number[] | null {
  const steps = hist.reduce((a, b) => a + b, 0);
  if (!(steps > 0) || hist.length < 2) return null;
  const out: number[] = [];
  let atLeast = steps;
  for (let j = 1; j < hist.length; j++) {
    atLeast -= hist[j - 1] ?? 0;
    out.push(atLeast / steps);
  }
  return out;
}

export function acceptFigures(ok: readonly RequestResult[]): AcceptFigures {
  let steps = 0;
  let tokens = 0;
  let n = 0;
  let hist: number[] | null = null;
  for (const r of ok) {
    if (r.specVerifyCt === undefined || !(r.specVerifyCt > 0)) continue;
    steps += r.specVerifyCt;
    tokens += r.outputTokens;
    n++;
    if (r.specHistogram) hist = addHistograms(hist, r.specHistogram);
  }
  if (n === 0) return NO_ACCEPT;
  return {
    accept_length_pooled: tokens / steps,
    spec_verify_steps: steps,
    spec_completion_tokens: tokens,
    spec_requests: n,
    spec_accept_histogram: hist,
    accept_per_position: hist ? perPosition(hist) : null,
  };
}

/** The figures of several rounds as one: counts summed, ratios taken again from the sums. */
export function mergeAcceptFigures(parts: readonly Partial<AcceptFigures>[]): AcceptFigures {
  let steps = 0;
  let tokens = 0;
  let n = 0;
  let hist: number[] | null = null;
  for (const p of parts) {
    if (!p.spec_verify_steps || p.spec_completion_tokens == null) continue;
    steps += p.spec_verify_steps;
    tokens += p.spec_completion_tokens;
    n += p.spec_requests ?? 0;
    if (p.spec_accept_histogram) hist = addHistograms(hist, p.spec_accept_histogram);
  }
  if (steps === 0) return NO_ACCEPT;
  return {
    accept_length_pooled: tokens / steps,
    spec_verify_steps: steps,
    spec_completion_tokens: tokens,
    spec_requests: n,
    spec_accept_histogram: hist,
    accept_per_position: hist ? perPosition(hist) : null,
  };
}
