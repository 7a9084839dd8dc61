// Shapes shared by the load generator, the metrics and the report.

export type BenchApi = 'generate' | 'chat';

/** One measured request, timed the way bench_serving times its `sglang` backend. */
export interface RequestResult {
  /** Position of the prompt in the level's prompt list. */
  index: number;
  /** When the request was sent, ms after the level's first measured request was sent. */
  sentAtMs: number;
  /**
   * Time to the first chunk carrying text; 0 when none arrived (bench_serving leaves it 0 too).
   * Chat: "text" is what the level's bench_serving release times (bench-rules.ts): content
   * only up to 0.5.9, reasoning_content too from 0.5.12.
   */
  ttftMs: number;
  /**
   * Inter-token latencies: for each chunk after the first, (gap since the previous
   * text chunk) / (tokens new in this chunk), repeated once per new token.
   */
  itlsMs: number[];
  /** Chat: one gap per text chunk after the first, unsplit (bench_serving's chat ITL without speculation). */
  chunkItlsMs?: number[];
  /** Chat: send → first non-empty delta.content. */
  firstContentMs?: number;
  /** Chat: send → first non-empty delta.reasoning_content; absent when the answer had no reasoning. */
  firstReasoningMs?: number;
  /** Chat: chunks that carried reasoning text. */
  reasoningChunks?: number;
  /** Chat: usage.reasoning_tokens (or completion_tokens_details.reasoning_tokens) when the server reports it. */
  reasoningTokens?: number;
  /** Send to the last SSE event read (`[DONE]` included), as bench_serving's `latency`. */
  e2eMs: number;
  /** meta_info.completion_tokens / usage.completion_tokens, else text chunks counted. */
  outputTokens: number;
  /**
   * meta_info.prompt_tokens / usage.prompt_tokens; 0 when the server did not say. Server-counted:
   * on chat it includes the chat template, which bench_serving's prompt_len does not (metrics.ts).
   */
  promptTokens: number;
  /** The answer bench_serving retokenizes (tally.ts generatedText): /generate's final text, chat's timed deltas. */
  generatedText?: string;
  /** meta_info.spec_accept_length, else completion_tokens / spec_verify_ct; absent without speculation. */
  acceptLength?: number;
  /** meta_info.spec_verify_ct (target verify forwards) from the final chunk; absent without speculation. */
  specVerifyCt?: number;
  /** meta_info's accepted-drafts histogram (accept.ts histogramOf); absent where the release reports none. */
  specHistogram?: number[];
  /** meta_info.e2e_latency × 1000 from the final chunk, when present. */
  serverE2eMs?: number;
  /** Why the request failed; absent on success. Failed requests are left out of the latency stats. */
  error?: string;
}

export interface LevelRun {
  /** Measured requests, in prompt order (warmup excluded). */
  results: RequestResult[];
  /** First measured send to last measured completion. */
  durationMs: number;
  /** Wall-clock ISO time of the first measured send. */
  startedAt: string;
  /** The target number of requests in flight. */
  concurrency: number;
  /** The uncounted warmup requests, kept so a caller can see that warmup failed. */
  warmup: RequestResult[];
  /** Most requests observed in flight at once (client side). */
  maxInFlight: number;
}
