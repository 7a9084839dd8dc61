// The chat reasoning phase of a level (metrics.ts's AerieExtras), reported beside TTFT and ITL
// rather than folded into them: its own file so metrics.ts stays one screenful of definitions.

import type { BenchServingRules } from './bench-rules.js';
import type { AerieExtras } from './record.js';
import { distribution } from './numpy-stats.js';
import type { RequestResult } from './types.js';

type ReasoningFigures = Pick<
  AerieExtras,
  | 'chat_text_basis'
  | 'requests_with_reasoning'
  | 'mean_time_to_first_reasoning_ms'
  | 'median_time_to_first_reasoning_ms'
  | 'p99_time_to_first_reasoning_ms'
  | 'mean_time_to_first_content_ms'
  | 'total_reasoning_chunks'
  | 'total_reasoning_tokens'
>;

/** The reasoning phase, reported beside TTFT and ITL rather than folded into them (or only into them). */
export function reasoningFigures(
  ok: readonly RequestResult[],
  chat: boolean,
  rules: BenchServingRules,
): ReasoningFigures {
  if (!chat) {
    return {
      chat_text_basis: null,
      requests_with_reasoning: null,
      mean_time_to_first_reasoning_ms: null,
      median_time_to_first_reasoning_ms: null,
      p99_time_to_first_reasoning_ms: null,
      mean_time_to_first_content_ms: null,
      total_reasoning_chunks: null,
      total_reasoning_tokens: null,
    };
  }
  const ttfr = ok.map((r) => r.firstReasoningMs).filter((v): v is number => v !== undefined);
  const d = ttfr.length > 0 ? distribution(ttfr) : undefined;
  const tokens = ok.map((r) => r.reasoningTokens).filter((v): v is number => v !== undefined);
  return {
    chat_text_basis: rules.chatReasoningIsText ? 'reasoning+content' : 'content',
    requests_with_reasoning: ttfr.length,
    mean_time_to_first_reasoning_ms: d?.mean ?? null,
    median_time_to_first_reasoning_ms: d?.median ?? null,
    p99_time_to_first_reasoning_ms: d?.p99 ?? null,
    mean_time_to_first_content_ms: meanOf(ok.map((r) => r.firstContentMs)),
    total_reasoning_chunks: ok.reduce((a, r) => a + (r.reasoningChunks ?? 0), 0),
    total_reasoning_tokens: tokens.length > 0 ? tokens.reduce((a, b) => a + b, 0) : null,
  };
}

function meanOf(values: readonly (number | undefined)[]): number | null {
  let sum = 0;
  let n = 0;
  for (const v of values) {
    if (v === undefined) continue;
    sum += v;
    n++;
  }
  return n === 0 ? null : sum / n;
}
