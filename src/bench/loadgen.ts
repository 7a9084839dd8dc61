// Closed-loop load generator for one concurrency level against an SGLang server.
//
// Exactly `concurrency` requests are in flight until the prompts run out: each of
// `concurrency` workers sends its next request as soon as its previous one finished,
// so there is no batch barrier (bench_serving with request-rate inf and
// --max-concurrency C behaves the same way through its semaphore).
//
// Each slot owns one keep-alive HTTP/1.1 connection (http1.ts) and the body bytes go
// straight to a byte-level SSE framer (sse-bytes.ts) and the tally: no fetch or
// node:http stream machinery per frame, and the cumulative /generate text is never
// decoded. At 250 streams that is what keeps the client off the critical path
// (bench/client-overhead.ts measures it).

import { performance } from 'node:perf_hooks';
import type { BenchServingRules } from './bench-rules.js';
import { Http1Connection, type Http1Error } from './http1.js';
import { SseByteFramer, type FramedEvent } from './sse-bytes.js';
import { errorMessage, finishTally, newTally, tallyFramed } from './tally.js';
import type { BenchApi, LevelRun, RequestResult } from './types.js';

export type { BenchApi, LevelRun, RequestResult } from './types.js';

export interface RunLevelOptions {
  /** Server root, e.g. http://127.0.0.1:30000 (a path prefix is kept). */
  baseUrl: string;
  api: BenchApi;
  prompts: string[];
  concurrency: number;
  /** max_new_tokens (generate) / max_tokens (chat); EOS is ignored so every request makes this many. */
  outputLen: number;
  /** Uncounted requests sent together before the level, output capped at 32 like bench_serving's. */
  warmup: number;
  /** Aborting destroys in-flight requests and makes runLevel reject with the signal's reason. */
  signal?: AbortSignal;
  /** Called after each measured request finishes. Exceptions from it are ignored. */
  onProgress?: (done: number, total: number) => void;
  /** Chat `model` field; SGLang serves one model and does not check the name. Default "default". */
  model?: string;
  /** A request that receives no bytes for this long fails. Default 30 min: a queued request is silent until its first token. */
  idleTimeoutMs?: number;
  /**
   * Runs after the warmup and before the first measured request, e.g. a /flush_cache so
   * the server's running accept length covers the measured requests only.
   */
  beforeMeasure?: () => Promise<void>;
  /** Whose bench_serving definitions the timing follows (bench-rules.ts); default the newest checked release. */
  rules?: BenchServingRules;
}

/** bench_serving caps warmup output at 32 tokens. */
export const WARMUP_MAX_OUTPUT = 32;
const DEFAULT_IDLE_TIMEOUT_MS = 30 * 60_000;
/** After `[DONE]` the server should end the response at once; don't let a stuck one hold the slot's connection. */
const END_AFTER_DONE_GRACE_MS = 1000;
const MAX_ERROR_BODY = 4096;

export async function runLevel(opts: RunLevelOptions): Promise<LevelRun> {
  if (!Number.isInteger(opts.concurrency) || opts.concurrency < 1) {
    throw new RangeError(`concurrency must be a positive integer, got ${opts.concurrency}`);
  }
  if (!Number.isInteger(opts.outputLen) || opts.outputLen < 1) {
    throw new RangeError(`outputLen must be a positive integer, got ${opts.outputLen}`);
  }
  const target = endpointFor(opts.baseUrl, opts.api);
  const idleTimeoutMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const connections = new Set<Http1Connection>();
  const connection = (): Http1Connection => {
    const c = new Http1Connection(target, idleTimeoutMs);
    connections.add(c);
    return c;
  };
  // One abort listener for the level, not one per request: hundreds of listeners on
  // one signal trip Node's MaxListeners leak warning.
  const inFlightAborts = new Set<() => void>();
  const abortAll = (): void => {
    for (const abort of [...inFlightAborts]) abort();
  };
  opts.signal?.addEventListener('abort', abortAll, { once: true });
  const send = (conn: Http1Connection, prompt: string, outputLen: number, index: number, levelStart: number) =>
    sendOne({
      conn,
      path: target.path,
      api: opts.api,
      body: requestBody(opts.api, prompt, outputLen, opts.model),
      index,
      levelStart,
      aborts: inFlightAborts,
      rules: opts.rules,
    });
  try {
    opts.signal?.throwIfAborted();
    const total = opts.prompts.length;
    const warmupOutput = Math.min(opts.outputLen, WARMUP_MAX_OUTPUT);
    const warmupStart = performance.now();
    const warmup =
      total === 0
        ? []
        : await Promise.all(
            Array.from({ length: Math.max(0, opts.warmup) }, (_, i) =>
              send(connection(), opts.prompts[0], warmupOutput, i, warmupStart),
            ),
          );
    opts.signal?.throwIfAborted();
    if (total > 0) await opts.beforeMeasure?.();
    opts.signal?.throwIfAborted();

    const results: RequestResult[] = new Array(total);
    let next = 0;
    let done = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const startedAt = new Date().toISOString();
    const levelStart = performance.now();
    const worker = async (): Promise<void> => {
      const conn = connection();
      while (next < total && !opts.signal?.aborted) {
        const i = next++;
        inFlight++;
        if (inFlight > maxInFlight) maxInFlight = inFlight;
        results[i] = await send(conn, opts.prompts[i], opts.outputLen, i, levelStart);
        inFlight--;
        done++;
        try {
          opts.onProgress?.(done, total);
        } catch {
          // Progress reporting must never stop a measurement mid-level.
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(opts.concurrency, total) }, worker));
    const durationMs = performance.now() - levelStart;
    opts.signal?.throwIfAborted();
    return { results, durationMs, startedAt, concurrency: opts.concurrency, warmup, maxInFlight };
  } finally {
    opts.signal?.removeEventListener('abort', abortAll);
    for (const c of connections) c.destroy();
  }
}

interface Target {
  tls: boolean;
  hostname: string;
  port: number;
  path: string;
}

export function endpointFor(baseUrl: string, api: BenchApi): Target {
  const u = new URL(baseUrl);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`unsupported base URL: ${baseUrl}`);
  const prefix = u.pathname.replace(/\/+$/, '');
  return {
    tls: u.protocol === 'https:',
    // URL keeps IPv6 brackets; sockets want them off.
    hostname: u.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80,
    path: prefix + (api === 'generate' ? '/generate' : '/v1/chat/completions'),
  };
}

/** The request bench_serving's sglang / sglang-oai-chat backends send, greedy and EOS-ignoring. */
export function requestBody(api: BenchApi, prompt: string, outputLen: number, model?: string): Record<string, unknown> {
  if (api === 'generate') {
    return {
      text: prompt,
      sampling_params: { max_new_tokens: outputLen, temperature: 0, ignore_eos: true },
      stream: true,
    };
  }
  return {
    model: model ?? 'default',
    messages: [{ role: 'user', content: prompt }],
    max_tokens: outputLen,
    temperature: 0,
    ignore_eos: true,
    stream: true,
    // continuous_usage_stats lets multi-token chunks be split per token; servers that
    // don't know it ignore it and the final usage chunk still gives the count.
    stream_options: { include_usage: true, continuous_usage_stats: true },
  };
}

interface SendArgs {
  conn: Http1Connection;
  path: string;
  api: BenchApi;
  body: Record<string, unknown>;
  index: number;
  levelStart: number;
  /** Registry the level's abort listener walks; each request adds itself while in flight. */
  aborts: Set<() => void>;
  rules: BenchServingRules | undefined;
}

/** One streamed request. Never rejects: every failure becomes `error` on the result. */
function sendOne(a: SendArgs): Promise<RequestResult> {
  return new Promise((resolve) => {
    const payload = Buffer.from(JSON.stringify(a.body));
    const sentAt = performance.now();
    const tally = newTally(a.api, sentAt, a.rules);
    const framer = new SseByteFramer();
    let settled = false;
    let graceTimer: NodeJS.Timeout | undefined;
    let errorStatus: string | undefined;
    let errorBody = '';

    const finish = (failure?: string): void => {
      if (settled) return;
      settled = true;
      if (graceTimer) clearTimeout(graceTimer);
      a.aborts.delete(onAbort);
      resolve(finishTally(tally, a.index, sentAt - a.levelStart, performance.now(), failure));
    };
    const onAbort = (): void => {
      finish('aborted');
      a.conn.destroy();
    };
    const onEvents = (events: FramedEvent[], now: number): void => {
      for (const ev of events) {
        if (settled || tally.done || tally.error !== undefined) return;
        if (tallyFramed(tally, ev, now)) {
          if (tally.error !== undefined) {
            finish();
            a.conn.destroy();
          } else {
            graceTimer = setTimeout(() => {
              finish();
              a.conn.destroy();
            }, END_AFTER_DONE_GRACE_MS);
          }
          return;
        }
      }
    };

    a.aborts.add(onAbort);
    a.conn.request('POST', a.path, { 'Content-Type': 'application/json', Accept: 'text/event-stream' }, payload, {
      onHead: (status, message) => {
        if (status !== 200) errorStatus = `HTTP ${status}${message ? ` ${message}` : ''}`;
      },
      onBody: (chunk) => {
        if (settled) return;
        if (errorStatus !== undefined) {
          if (errorBody.length < MAX_ERROR_BODY)
            errorBody += chunk.toString('utf8').slice(0, MAX_ERROR_BODY - errorBody.length);
          return;
        }
        onEvents(framer.push(chunk), performance.now());
      },
      onEnd: () => {
        if (errorStatus !== undefined) return finish(httpError(errorStatus, errorBody));
        if (!settled) onEvents(framer.end(), performance.now());
        finish();
      },
      onError: (err) => {
        if (errorStatus !== undefined) return finish(httpError(errorStatus, errorBody));
        finish(tally.done ? undefined : transportError(err));
      },
    });
  });
}

function transportError(err: Http1Error): string {
  if (err.kind === 'timeout') return err.message;
  if (err.kind === 'closed') return err.afterHead ? 'connection closed before [DONE]' : `request error: ${err.message}`;
  return `${err.afterHead ? 'response error' : 'request error'}: ${err.message}`;
}

function httpError(status: string, body: string): string {
  let detail = body.trim();
  try {
    const parsed: unknown = JSON.parse(detail);
    if (parsed && typeof parsed === 'object' && 'error' in parsed)
      detail = errorMessage((parsed as { error: unknown }).error);
    else if (parsed && typeof parsed === 'object' && 'detail' in parsed)
      detail = errorMessage((parsed as { detail: unknown }).detail);
  } catch {
    // Not JSON: keep the text.
  }
  return detail ? `${status}: ${detail.slice(0, 500)}` : status;
}
