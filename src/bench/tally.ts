// Per-request bookkeeping for one SGLang stream: turns SSE events plus their arrival
// times into TTFT, ITLs, E2E and the token counts, following bench_serving's sglang and
// sglang-oai-chat backends of the release in `rules` (bench-rules.ts; see docs in
// RequestResult). Pure: time is passed in, no I/O, so the rules are golden-testable. Each event costs one JSON.parse and O(new tokens) work; the
// cumulative text SGLang resends in every chunk is looked at only for emptiness.

import { histogramOf } from './accept.js';
import { firstKeyIs, objectValueRange, stringValueState } from './json-scan.js';
import { benchServingRules, type BenchServingRules } from './bench-rules.js';
import type { SseEvent } from './sse.js';
import { SSE_DONE } from './sse.js';
import type { FramedEvent } from './sse-bytes.js';
import type { BenchApi, RequestResult } from './types.js';

type Json = Record<string, unknown>;

export interface StreamTally {
  readonly api: BenchApi;
  readonly sentAt: number;
  readonly rules: BenchServingRules;
  firstTokenAt: number | undefined;
  lastTokenAt: number;
  lastEventAt: number | undefined;
  /** Tokens generated as of the last text chunk that brought new tokens. */
  lastCount: number;
  textChunks: number;
  itlsMs: number[];
  completionTokens: number | undefined;
  promptTokens: number | undefined;
  /** The newest meta_info seen (the final chunk's carries e2e_latency and spec fields). */
  meta: Json | undefined;
  done: boolean;
  error: string | undefined;
  /** Chat: one gap per text chunk after the first (bench_serving's chat ITL without the split). */
  chunkItlsMs: number[];
  /** Chat: when the last text chunk arrived (every one moves it, as bench_serving's most_recent_timestamp). */
  lastChunkAt: number | undefined;
  firstContentAt: number | undefined;
  firstReasoningAt: number | undefined;
  reasoningChunks: number;
  reasoningTokens: number | undefined;
  /**
   * The answer as bench_serving keeps it for retokenizing: /generate's last non-empty
   * cumulative text (kept as its undecoded frame until the end), chat's timed deltas joined.
   */
  lastText: string | Buffer | undefined;
  chatText: string[];
}

export function newTally(api: BenchApi, sentAt: number, rules: BenchServingRules = DEFAULT_RULES): StreamTally {
  return {
    api,
    sentAt,
    rules,
    firstTokenAt: undefined,
    lastTokenAt: sentAt,
    lastEventAt: undefined,
    lastCount: 0,
    textChunks: 0,
    itlsMs: [],
    completionTokens: undefined,
    promptTokens: undefined,
    meta: undefined,
    done: false,
    error: undefined,
    chunkItlsMs: [],
    lastChunkAt: undefined,
    firstContentAt: undefined,
    firstReasoningAt: undefined,
    reasoningChunks: 0,
    reasoningTokens: undefined,
    lastText: undefined,
    chatText: [],
  };
}

const DEFAULT_RULES = benchServingRules();

/** Account one event; returns true when the stream is over (`[DONE]` or an error). */
export function tallyEvent(t: StreamTally, ev: SseEvent, now: number): boolean {
  t.lastEventAt = now;
  if (ev.data === SSE_DONE) {
    t.done = true;
    return true;
  }
  let data: unknown;
  try {
    data = JSON.parse(ev.data);
  } catch {
    t.error = `unparseable stream event: ${ev.data.slice(0, 200)}`;
    return true;
  }
  if (!isObject(data)) return false;
  if (data.error !== undefined && data.error !== null) {
    t.error = `stream error: ${errorMessage(data.error)}`;
    return true;
  }
  if (t.api === 'generate') tallyGenerate(t, data, now);
  else tallyChat(t, data, now);
  return false;
}

function tallyGenerate(t: StreamTally, data: Json, now: number): void {
  const meta = isObject(data.meta_info) ? data.meta_info : undefined;
  const hasText = typeof data.text === 'string' && data.text.length > 0;
  if (hasText) t.lastText = data.text as string;
  applyGenerate(t, meta, hasText, now);
}

function applyGenerate(t: StreamTally, meta: Json | undefined, hasText: boolean, now: number): void {
  if (meta) {
    t.meta = meta;
    if (isNum(meta.completion_tokens)) t.completionTokens = meta.completion_tokens;
    if (isNum(meta.prompt_tokens)) t.promptTokens = meta.prompt_tokens;
  }
  if (!hasText) return;
  const count = meta && isNum(meta.completion_tokens) ? meta.completion_tokens : t.lastCount + 1;
  onText(t, count, now);
}

const DONE_BYTES = Buffer.from(SSE_DONE);

/**
 * tallyEvent for an event framed by SseByteFramer. A /generate frame is read without
 * decoding its cumulative text: only meta_info is parsed and the text is checked for
 * emptiness (json-scan.ts). Error frames (first key "error") and frames of any other
 * shape take the full-parse path, so the result is the same as tallyEvent's.
 */
export function tallyFramed(t: StreamTally, ev: FramedEvent, now: number): boolean {
  if (!Buffer.isBuffer(ev)) return tallyEvent(t, ev, now);
  if (t.api !== 'generate' || ev[0] !== 0x7b /* { */ || firstKeyIs(ev, 'error')) {
    if (ev.length === DONE_BYTES.length && ev.equals(DONE_BYTES)) return tallyEvent(t, { data: SSE_DONE }, now);
    return tallyEvent(t, { data: ev.toString('utf8') }, now);
  }
  const range = objectValueRange(ev, 'meta_info', true);
  const text = stringValueState(ev, 'text');
  if (!range || text === 'not-a-string') return tallyEvent(t, { data: ev.toString('utf8') }, now);
  let meta: unknown;
  try {
    meta = JSON.parse(ev.toString('utf8', range[0], range[1]));
  } catch {
    return tallyEvent(t, { data: ev.toString('utf8') }, now);
  }
  t.lastEventAt = now;
  // A reference only: the frame is decoded once, at the end, if the text is asked for.
  if (text === 'non-empty') t.lastText = ev;
  applyGenerate(t, isObject(meta) ? meta : undefined, text === 'non-empty', now);
  return false;
}

function tallyChat(t: StreamTally, data: Json, now: number): void {
  const usage = isObject(data.usage) ? data.usage : undefined;
  if (usage) {
    if (isNum(usage.completion_tokens)) t.completionTokens = usage.completion_tokens;
    if (isNum(usage.prompt_tokens)) t.promptTokens = usage.prompt_tokens;
    const details = isObject(usage.completion_tokens_details) ? usage.completion_tokens_details : undefined;
    // SGLang's UsageInfo.reasoning_tokens (sglang==0.5.4:srt/entrypoints/openai/protocol.py:106), and
    // OpenAI's completion_tokens_details.reasoning_tokens (sglang==0.5.23:srt/entrypoints/openai/protocol.py:227-229).
    const rt =
      isNum(usage.reasoning_tokens) && usage.reasoning_tokens > 0
        ? usage.reasoning_tokens
        : details && isNum(details.reasoning_tokens)
          ? details.reasoning_tokens
          : undefined;
    if (rt !== undefined) t.reasoningTokens = rt;
  }
  const choices = Array.isArray(data.choices) ? data.choices : undefined;
  const delta = choices && isObject(choices[0]) && isObject(choices[0].delta) ? choices[0].delta : undefined;
  if (!delta) return;
  const content = nonEmpty(delta.content);
  // `reasoning` is vLLM's name, which 0.5.23's bench_serving reads when reasoning_content is empty.
  const reasoning = nonEmpty(delta.reasoning_content) || nonEmpty(delta.reasoning);
  if (reasoning) {
    t.reasoningChunks++;
    t.firstReasoningAt ??= now;
  }
  if (content) t.firstContentAt ??= now;
  // With continuous_usage_stats the chunk says how many tokens exist so far, so a
  // multi-token (speculative) chunk can be split per token like /generate.
  const count = usage && isNum(usage.completion_tokens) ? usage.completion_tokens : undefined;
  if (!(content || (reasoning && t.rules.chatReasoningIsText))) {
    // A reasoning chunk outside the timed text: its tokens must not be spread over the
    // next content chunk's gap.
    if (count !== undefined && t.firstTokenAt !== undefined) t.lastCount = count;
    return;
  }
  if (t.lastChunkAt !== undefined) t.chunkItlsMs.push(now - t.lastChunkAt);
  t.lastChunkAt = now;
  // bench_serving's generated_text: the deltas it timed, reasoning first (sglang==0.5.12:sglang/bench_serving.py:480-498).
  if (reasoning && t.rules.chatReasoningIsText) t.chatText.push(String(delta.reasoning_content || delta.reasoning));
  if (content) t.chatText.push(delta.content as string);
  onText(t, count ?? t.lastCount + 1, now);
}

// bench_serving's sglang rule: the first text chunk sets TTFT (its tokens get no ITL);
// each later chunk spreads its gap evenly over the tokens it added; a chunk that adds
// none is skipped entirely, so its gap rolls into the next chunk's.
function onText(t: StreamTally, count: number, now: number): void {
  t.textChunks++;
  if (t.firstTokenAt === undefined) {
    t.firstTokenAt = now;
  } else {
    const added = count - t.lastCount;
    if (added === 0) return;
    if (added > 0) {
      const itl = (now - t.lastTokenAt) / added;
      for (let k = 0; k < added; k++) t.itlsMs.push(itl);
    }
  }
  t.lastTokenAt = now;
  t.lastCount = count;
}

/** Close the tally. `failure` is a transport / HTTP error that ended the request. */
export function finishTally(
  t: StreamTally,
  index: number,
  sentAtMs: number,
  now: number,
  failure?: string,
): RequestResult {
  const end = t.lastEventAt ?? now;
  const r: RequestResult = {
    index,
    sentAtMs,
    ttftMs: t.firstTokenAt === undefined ? 0 : t.firstTokenAt - t.sentAt,
    itlsMs: t.itlsMs,
    e2eMs: end - t.sentAt,
    outputTokens: t.completionTokens ?? (t.api === 'generate' ? t.lastCount : t.textChunks),
    promptTokens: t.promptTokens ?? 0,
    generatedText: generatedText(t),
  };
  if (t.api === 'chat') {
    r.chunkItlsMs = t.chunkItlsMs;
    r.reasoningChunks = t.reasoningChunks;
    if (t.firstContentAt !== undefined) r.firstContentMs = t.firstContentAt - t.sentAt;
    if (t.firstReasoningAt !== undefined) r.firstReasoningMs = t.firstReasoningAt - t.sentAt;
    if (t.reasoningTokens !== undefined) r.reasoningTokens = t.reasoningTokens;
  }
  const accept = acceptLengthOf(t.meta);
  if (accept !== undefined) r.acceptLength = accept;
  if (t.meta && isNum(t.meta.spec_verify_ct) && t.meta.spec_verify_ct > 0) r.specVerifyCt = t.meta.spec_verify_ct;
  const hist = histogramOf(t.meta);
  if (hist) r.specHistogram = hist;
  if (t.meta && isNum(t.meta.e2e_latency)) r.serverE2eMs = t.meta.e2e_latency * 1000;
  const error = failure ?? t.error ?? (t.done ? undefined : 'stream ended before [DONE]');
  if (error !== undefined) r.error = error;
  return r;
}

/**
 * The answer text bench_serving would retokenize for total_output_tokens_retokenized
 * (sglang==0.5.4:sglang/bench_serving.py:562-564 keeps /generate's last non-empty text,
 * :1625-1627 encodes it): decoded here, after the request, not while it streams.
 */
export function generatedText(t: StreamTally): string {
  if (t.api === 'chat') return t.chatText.join('');
  if (typeof t.lastText === 'string' || t.lastText === undefined) return t.lastText ?? '';
  try {
    const frame = JSON.parse(t.lastText.toString('utf8')) as { text?: unknown };
    return typeof frame.text === 'string' ? frame.text : '';
  } catch {
    return '';
  }
}

/** spec_accept_length when the server reports it, else completion_tokens / spec_verify_ct. */
export function acceptLengthOf(meta: Json | undefined): number | undefined {
  if (!meta) return undefined;
  if (isNum(meta.spec_accept_length) && meta.spec_accept_length > 0) return meta.spec_accept_length;
  if (isNum(meta.spec_verify_ct) && meta.spec_verify_ct > 0 && isNum(meta.completion_tokens)) {
    return meta.completion_tokens / meta.spec_verify_ct;
  }
  return undefined;
}

/** SGLang errors are `{"error": {"message": ...}}`, sometimes a bare string. */
export function errorMessage(err: unknown): string {
  if (typeof err === 'string') return err;
  if (isObject(err) && typeof err.message === 'string') return err.message;
  try {
    return JSON.stringify(err).slice(0, 500);
  } catch {
    return String(err);
  }
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isNum(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

function nonEmpty(v: unknown): boolean {
  return typeof v === 'string' && v.length > 0;
}
