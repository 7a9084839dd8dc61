// Acceptance by domain: code, chat and math differ by a full token of accept length in
// published tables, so one level-wide figure hides where a drafter is weak. When the
// dataset gives a category per prompt (a `category` field on the row, MT-bench style),
// each level keeps per-category sums, and the report divides them.
//
// Speedup per category cannot be a throughput ratio (the categories share one batch), so it
// is the ratio of mean TPOT (baseline ÷ speculative) over the same prompts at the same
// concurrency: the per-token time each category's requests saw.

import type { RequestResult } from './types.js';

export interface CategoryFigures {
  category: string;
  requests: number;
  output_tokens: number;
  /** Σ and count of TPOT (bench_serving's definition), kept so rounds merge exactly. */
  tpot_sum_ms: number;
  tpot_n: number;
  mean_tpot_ms: number | null;
  /** Σ completion tokens ÷ Σ spec_verify_ct over the category's speculative requests. */
  accept_length_pooled: number | null;
  spec_verify_steps: number;
  spec_completion_tokens: number;
  /** Σ and count of per-request accept lengths; their ratio is mean_accept_length_per_request. */
  accept_sum: number;
  accept_n: number;
  mean_accept_length_per_request: number | null;
}

/** Name used for a prompt whose row carried no category, in a dataset where others did. */
export const UNCATEGORIZED = '(none)';

function finish(c: Omit<CategoryFigures, 'mean_tpot_ms' | 'accept_length_pooled' | 'mean_accept_length_per_request'>) {
  return {
    ...c,
    mean_tpot_ms: c.tpot_n > 0 ? c.tpot_sum_ms / c.tpot_n : null,
    accept_length_pooled: c.spec_verify_steps > 0 ? c.spec_completion_tokens / c.spec_verify_steps : null,
    mean_accept_length_per_request: c.accept_n > 0 ? c.accept_sum / c.accept_n : null,
  };
}

function empty(category: string) {
  return {
    category,
    requests: 0,
    output_tokens: 0,
    tpot_sum_ms: 0,
    tpot_n: 0,
    spec_verify_steps: 0,
    spec_completion_tokens: 0,
    accept_sum: 0,
    accept_n: 0,
  };
}

/** Per-category sums of a level's successful requests; categories by RequestResult.index. Sorted by name. */
export function categoryFigures(
  ok: readonly RequestResult[],
  categories: readonly (string | undefined)[],
): CategoryFigures[] | null {
  if (!categories.some((c) => c !== undefined)) return null;
  const by = new Map<string, ReturnType<typeof empty>>();
  for (const r of ok) {
    const name = categories[r.index] ?? UNCATEGORIZED;
    let c = by.get(name);
    if (!c) by.set(name, (c = empty(name)));
    c.requests++;
    c.output_tokens += r.outputTokens;
    // bench_serving's TPOT (metrics.ts tpotsMs), for requests with more than one output token.
    if (r.outputTokens > 1) {
      c.tpot_sum_ms += (r.e2eMs - r.ttftMs) / (r.outputTokens - 1);
      c.tpot_n++;
    }
    if (r.specVerifyCt !== undefined && r.specVerifyCt > 0) {
      c.spec_verify_steps += r.specVerifyCt;
      c.spec_completion_tokens += r.outputTokens;
    }
    if (r.acceptLength !== undefined) {
      c.accept_sum += r.acceptLength;
      c.accept_n++;
    }
  }
  return [...by.values()].sort((a, b) => a.category.localeCompare(b.category)).map(finish);
}

/** Several rounds' category figures as one (sums added, means taken again). */
export function mergeCategories(
  parts: readonly (readonly CategoryFigures[] | null | undefined)[],
): CategoryFigures[] | null {
  const by = new Map<string, ReturnType<typeof empty>>();
  let any = false;
  for (const p of parts) {
    if (!p) continue;
    any = true;
    for (const f of p) {
      let c = by.get(f.category);
      if (!c) by.set(f.category, (c = empty(f.category)));
      c.requests += f.requests;
      c.output_tokens += f.output_tokens;
      c.tpot_sum_ms += f.tpot_sum_ms;
      c.tpot_n += f.tpot_n;
      c.spec_verify_steps += f.spec_verify_steps;
      c.spec_completion_tokens += f.spec_completion_tokens;
      c.accept_sum += f.accept_sum;
      c.accept_n += f.accept_n;
    }
  }
  if (!any) return null;
  return [...by.values()].sort((a, b) => a.category.localeCompare(b.category)).map(finish);
}
