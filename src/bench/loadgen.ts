// Closed-loop load generator for one concurrency level against an SGLang server.
//
// Exactly `concurrency` requests are in flight until the prompts run out: each of
// `concurrency` workers sends its next request as soon as its previous one finished,
// so there is no batch barrier (bench_serving with request-rate inf and
// --max-concurrency C behaves the same way through its semaphore).
//
// Uses node:http with its own keep-alive Agent sized to the concurrency rather than
// global fetch: fetch's pool and body streams add per-chunk overhead and their own
// connection limits, which cap achieved concurrency at 100+ streams on a busy client.

import * as http from 'node:http';
import * as https from 'node:https';
import { performance } from 'node:perf_hooks';
import { SseParser } from './sse.js';
import { errorMessage, finishTally, newTally, tallyEvent } from './tally.js';
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
}

/** bench_serving caps warmup output at 32 tokens. */
export const WARMUP_MAX_OUTPUT = 32;
const DEFAULT_IDLE_TIMEOUT_MS = 30 * 60_000;
/** After `[DONE]` the server should end the response at once; don't let a stuck one hold a pooled socket. */
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
  const agent = new target.mod.Agent({
    keepAlive: true,
    maxSockets: opts.concurrency,
    maxFreeSockets: opts.concurrency,
  });
  // One abort listener for the level, not one per request: hundreds of listeners on
  // one signal trip Node's MaxListeners leak warning.
  const inFlightAborts = new Set<() => void>();
  const abortAll = (): void => {
    for (const abort of [...inFlightAborts]) abort();
  };
  opts.signal?.addEventListener('abort', abortAll, { once: true });
  const send = (prompt: string, outputLen: number, index: number, levelStart: number) =>
    sendOne({
      target,
      agent,
      api: opts.api,
      body: requestBody(opts.api, prompt, outputLen, opts.model),
      index,
      levelStart,
      aborts: inFlightAborts,
      idleTimeoutMs: opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    });
  try {
    opts.signal?.throwIfAborted();
    const total = opts.prompts.length;
    const warmupOutput = Math.min(opts.outputLen, WARMUP_MAX_OUTPUT);
    const warmupStart = performance.now();
    const warmup = total === 0 ? [] : await Promise.all(
      Array.from({ length: Math.max(0, opts.warmup) }, (_, i) => send(opts.prompts[0], warmupOutput, i, warmupStart)),
    );
    opts.signal?.throwIfAborted();

    const results: RequestResult[] = new Array(total);
    let next = 0;
    let done = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const startedAt = new Date().toISOString();
    const levelStart = performance.now();
    const worker = async (): Promise<void> => {
      while (next < total && !opts.signal?.aborted) {
        const i = next++;
        inFlight++;
        if (inFlight > maxInFlight) maxInFlight = inFlight;
        results[i] = await send(opts.prompts[i], opts.outputLen, i, levelStart);
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
    agent.destroy();
  }
}

interface Target {
  mod: typeof http | typeof https;
  hostname: string;
  port: number;
  path: string;
}

export function endpointFor(baseUrl: string, api: BenchApi): Target {
  const u = new URL(baseUrl);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`unsupported base URL: ${baseUrl}`);
  const prefix = u.pathname.replace(/\/+$/, '');
  return {
    mod: u.protocol === 'https:' ? https : http,
    // URL keeps IPv6 brackets; http.request wants them off.
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
  target: Target;
  agent: http.Agent;
  api: BenchApi;
  body: Record<string, unknown>;
  index: number;
  levelStart: number;
  /** Registry the level's abort listener walks; each request adds itself while in flight. */
  aborts: Set<() => void>;
  idleTimeoutMs: number;
}

/** One streamed request. Never rejects: every failure becomes `error` on the result. */
function sendOne(a: SendArgs): Promise<RequestResult> {
  return new Promise((resolve) => {
    const payload = Buffer.from(JSON.stringify(a.body));
    const sentAt = performance.now();
    const tally = newTally(a.api, sentAt);
    let settled = false;
    let graceTimer: NodeJS.Timeout | undefined;

    const finish = (failure?: string): void => {
      if (settled) return;
      settled = true;
      if (graceTimer) clearTimeout(graceTimer);
      a.aborts.delete(onAbort);
      resolve(finishTally(tally, a.index, sentAt - a.levelStart, performance.now(), failure));
    };
    const onAbort = (): void => {
      finish('aborted');
      req.destroy();
    };

    const req = a.target.mod.request(
      {
        agent: a.agent,
        method: 'POST',
        hostname: a.target.hostname,
        port: a.target.port,
        path: a.target.path,
        headers: {
          'content-type': 'application/json',
          'content-length': payload.length,
          accept: 'text/event-stream',
        },
      },
      (res) => {
        if (res.statusCode !== 200) {
          collectErrorBody(res, (text) => finish(httpError(res, text)));
          return;
        }
        const parser = new SseParser();
        const onEvents = (events: ReturnType<SseParser['push']>, now: number): void => {
          for (const ev of events) {
            if (settled || tally.done || tally.error !== undefined) return;
            if (tallyEvent(tally, ev, now)) {
              if (tally.error !== undefined) {
                finish();
                req.destroy();
              } else {
                graceTimer = setTimeout(() => {
                  finish();
                  req.destroy();
                }, END_AFTER_DONE_GRACE_MS);
              }
              return;
            }
          }
        };
        res.on('data', (chunk: Buffer) => {
          if (!settled) onEvents(parser.push(chunk), performance.now());
        });
        res.on('end', () => {
          if (!settled) onEvents(parser.end(), performance.now());
          finish();
        });
        res.on('error', (err) => finish(tally.done ? undefined : `response error: ${err.message}`));
        res.on('close', () => finish(tally.done ? undefined : 'connection closed before [DONE]'));
      },
    );
    req.setTimeout(a.idleTimeoutMs, () => {
      finish(`no data for ${a.idleTimeoutMs} ms`);
      req.destroy();
    });
    req.on('error', (err) => finish(`request error: ${err.message}`));
    a.aborts.add(onAbort);
    req.end(payload);
  });
}

function collectErrorBody(res: http.IncomingMessage, done: (text: string) => void): void {
  let text = '';
  res.setEncoding('utf8');
  res.on('data', (s: string) => {
    if (text.length < MAX_ERROR_BODY) text += s.slice(0, MAX_ERROR_BODY - text.length);
  });
  res.on('end', () => done(text));
  res.on('error', () => done(text));
  res.on('close', () => done(text));
}

function httpError(res: http.IncomingMessage, body: string): string {
  let detail = body.trim();
  try {
    const parsed: unknown = JSON.parse(detail);
    if (parsed && typeof parsed === 'object' && 'error' in parsed) detail = errorMessage((parsed as { error: unknown }).error);
    else if (parsed && typeof parsed === 'object' && 'detail' in parsed) detail = errorMessage((parsed as { detail: unknown }).detail);
  } catch {
    // Not JSON: keep the text.
  }
  const status = `HTTP ${res.statusCode}${res.statusMessage ? ` ${res.statusMessage}` : ''}`;
  return detail ? `${status}: ${detail.slice(0, 500)}` : status;
}
