// bench_serving's prompt_len without a tokenizer in aerie: SGLang's own /tokenize of the
// raw prompt. bench_serving counts len(tokenizer.encode(prompt)), the HF default adding
// special tokens (BOS), no chat template, whatever the backend
// (sglang==0.5.4:sglang/bench_serving.py:1157-1160). /tokenize runs the server's tokenizer
// (the same files as bench_serving's --model) with add_special_tokens defaulting to true and
// takes a list of prompts (sglang==0.5.4:srt/entrypoints/openai/protocol.py:863-878,
// serving_tokenize.py:40-52; sglang==0.5.23:srt/entrypoints/openai/protocol.py:1744-1762,
// serving_tokenize.py:58-74). The route exists from 0.5.4 to 0.5.23
// (sglang==0.5.4:srt/entrypoints/http_server.py:1126-1137). It runs before a level's clock
// starts, so it costs no measured time.

/** Prompts per /tokenize call: keeps a body of long prompts to a few MB. */
const BATCH = 64;

export interface PromptCounts {
  /** bench_serving's prompt_len of each prompt, in the order given; undefined when they could not be counted. */
  lens: number[] | undefined;
  /** Why not, for the report. */
  problem?: string;
}

/**
 * Token counts of `prompts` by the server's tokenizer. addSpecialTokens: true for prompts
 * (bench_serving's prompt_len), false for answers (its retokenized output count,
 * sglang==0.5.4:sglang/bench_serving.py:1625-1627).
 */
export async function tokenizePrompts(
  baseUrl: string,
  prompts: readonly string[],
  signal?: AbortSignal,
  opts: { addSpecialTokens?: boolean; timeoutMs?: number } = {},
): Promise<PromptCounts> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const addSpecialTokens = opts.addSpecialTokens ?? true;
  // An empty answer has no tokens; SGLang's tokenizer would say the same without the round trip.
  const distinct = [...new Set(prompts)].filter((p) => p.length > 0 || addSpecialTokens);
  const counts = new Map<string, number>();
  const url = `${baseUrl.replace(/\/+$/, '')}/tokenize`;
  for (let i = 0; i < distinct.length; i += BATCH) {
    const batch = distinct.slice(i, i + BATCH);
    let body: unknown;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: batch, add_special_tokens: addSpecialTokens }),
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) return { lens: undefined, problem: `POST /tokenize answered HTTP ${res.status}` };
      body = await res.json();
    } catch (err) {
      signal?.throwIfAborted();
      return { lens: undefined, problem: `POST /tokenize failed: ${(err as Error).message}` };
    }
    const count = (body as { count?: unknown } | null)?.count;
    if (!Array.isArray(count) || count.length !== batch.length || !count.every((c) => Number.isInteger(c) && c >= 0)) {
      return { lens: undefined, problem: 'POST /tokenize answered without one count per prompt' };
    }
    batch.forEach((p, k) => counts.set(p, count[k] as number));
  }
  return { lens: prompts.map((p) => counts.get(p) ?? 0) };
}
