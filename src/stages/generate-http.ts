/**
 * JSON POSTs to a model server with the failure classes the data stages act on differently:
 * a server that cannot be reached stops the stage (nothing is recorded, a resume redoes the
 * work), while an HTTP error or a timeout belongs to the one sample and becomes its error row.
 */
import { sleep } from './generate-pool.js';

/** The server could not be reached at all (refused, reset, DNS): not the sample's fault. */
export class ServerUnreachableError extends Error {
  constructor(url: string, cause: unknown) {
    super(`cannot reach ${url}: ${describeCause(cause)}`);
    this.name = 'ServerUnreachableError';
  }
}

export class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(`HTTP ${status}: ${message}`);
    this.name = 'HttpStatusError';
  }
}

export class RequestTimeoutError extends Error {
  constructor(url: string, ms: number) {
    super(`no answer from ${url} within ${ms} ms`);
    this.name = 'RequestTimeoutError';
  }
}

function describeCause(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const inner = e?.cause?.code ?? e?.cause?.message;
  return inner ? `${e.message ?? String(err)} (${inner})` : (e?.message ?? String(err));
}

/** SGLang answers errors as {"error": {"message"}}; FastAPI validation as {"detail"}. */
function errorMessage(bodyText: string): string {
  try {
    const body = JSON.parse(bodyText) as Record<string, unknown>;
    const err = body.error as Record<string, unknown> | string | undefined;
    if (typeof err === 'string') return err;
    if (err && typeof err.message === 'string') return err.message;
    if (typeof body.message === 'string') return body.message;
    if (body.detail !== undefined) return JSON.stringify(body.detail);
  } catch {
    // not JSON: fall through to the raw text
  }
  return bodyText.slice(0, 500) || '(empty body)';
}

export interface PostOptions {
  signal?: AbortSignal;
  timeoutMs: number;
}

export async function postJson(url: string, body: unknown, opts: PostOptions): Promise<unknown> {
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  let res: Response;
  let text: string;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
    text = await res.text();
  } catch (err) {
    if (opts.signal?.aborted) throw opts.signal.reason ?? err;
    if (timeout.aborted) throw new RequestTimeoutError(url, opts.timeoutMs);
    throw new ServerUnreachableError(url, err);
  }
  if (res.status < 200 || res.status > 299) throw new HttpStatusError(res.status, errorMessage(text));
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error(`answer from ${url} is not JSON: ${text.slice(0, 200)}`);
  }
}

export interface RetryOptions {
  /** Extra attempts after the first. */
  retries: number;
  signal?: AbortSignal;
  /** First backoff; doubles per attempt, capped at 4 s. */
  backoffMs?: number;
}

/** Call fn until it succeeds or retries run out; an abort is never retried. */
export async function withRetries<T>(fn: () => Promise<T>, opts: RetryOptions): Promise<T> {
  const base = opts.backoffMs ?? 250;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (opts.signal?.aborted || attempt >= opts.retries) throw err;
      await sleep(Math.min(base * 2 ** attempt, 4000), opts.signal);
    }
  }
}
