// What a report must say about chat levels so their figures read right next to
// bench_serving's: whose timing rules they follow, where reasoning went, and how input
// tokens were counted (metrics.ts header, bench-rules.ts).

import type { BenchServingRecord } from './metrics.js';

const DASH = '—';
const fixed = (v: number | null | undefined, d: number): string =>
  v === null || v === undefined || !Number.isFinite(v) ? DASH : v.toFixed(d);

/** aerie's own chat records (an ingested bench_serving line has no total_input_tokens_server). */
function aerieChat(records: readonly BenchServingRecord[]): BenchServingRecord[] {
  return records.filter(
    (r) =>
      r.backend === 'sglang-oai-chat' &&
      r.total_input_tokens_server !== null &&
      r.total_input_tokens_server !== undefined,
  );
}

export function chatNotes(
  variants: ReadonlyArray<readonly [string, readonly BenchServingRecord[] | undefined]>,
): string[] {
  const out: string[] = [];
  const all = variants.flatMap(([, rs]) => aerieChat(rs ?? []));
  if (all.length === 0) return out;
  for (const rules of new Set(all.map((r) => r.bench_serving_rules).filter((x): x is string => !!x))) {
    const basis = all.find((r) => r.bench_serving_rules === rules)?.chat_text_basis;
    out.push(
      `Chat TTFT and ITL follow ${rules}: ` +
        (basis === 'content'
          ? "only delta.content is timed, so a reasoning model's think phase is inside TTFT; time to first reasoning is reported beside it."
          : 'reasoning_content and content are both timed, so TTFT is the first reasoning token; time to first content is reported beside it.') +
        " ITL is one gap per chunk, split over the chunk's tokens when the server reports speculation (bench_serving 0.5.9+).",
    );
  }
  out.push(
    "Chat input tokens: total_input_tokens counts the raw prompts as bench_serving's prompt_len does (the server's /tokenize, special tokens added, no chat template); " +
      "total_input_tokens_server in results.jsonl is the server's usage.prompt_tokens, chat template included.",
  );
  for (const [name, rs] of variants) {
    for (const r of aerieChat(rs ?? [])) {
      if (r.total_input_tokens === null) {
        out.push(
          `Concurrency ${r.max_concurrency ?? DASH}, ${name}: input tokens as bench_serving counts them are unknown (the server's /tokenize did not answer), so total_input_tokens and input_throughput are empty; ` +
            `the server counted ${r.total_input_tokens_server} with the chat template.`,
        );
      }
    }
  }
  return out;
}

export const REASONING_HEADERS = [
  'Concurrency',
  'Requests with reasoning',
  'TTFT times',
  'Mean TTFT (ms)',
  'Mean to first reasoning (ms)',
  'Median to first reasoning (ms)',
  'p99 to first reasoning (ms)',
  'Mean to first content (ms)',
  'Reasoning chunks',
  'Reasoning tokens',
];

export function reasoningCells(r: BenchServingRecord): string[] {
  return [
    r.max_concurrency === null ? DASH : String(r.max_concurrency),
    r.requests_with_reasoning === null ? DASH : `${r.requests_with_reasoning} of ${r.completed}`,
    r.chat_text_basis ?? DASH,
    fixed(r.mean_ttft_ms, 1),
    fixed(r.mean_time_to_first_reasoning_ms, 1),
    fixed(r.median_time_to_first_reasoning_ms, 1),
    fixed(r.p99_time_to_first_reasoning_ms, 1),
    fixed(r.mean_time_to_first_content_ms, 1),
    r.total_reasoning_chunks === null ? DASH : String(r.total_reasoning_chunks),
    r.total_reasoning_tokens === null ? DASH : String(r.total_reasoning_tokens),
  ];
}

/** The variants' chat records that streamed any reasoning, sorted by concurrency; empty when none did. */
export function reasoningRows(records: readonly BenchServingRecord[] | undefined): BenchServingRecord[] {
  const rs = aerieChat(records ?? []);
  if (!rs.some((r) => (r.requests_with_reasoning ?? 0) > 0)) return [];
  return [...rs].sort((a, b) => (a.max_concurrency ?? Infinity) - (b.max_concurrency ?? Infinity));
}
