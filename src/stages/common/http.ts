/**
 * JSON POSTs to a model server with the failure classes the data stages act on differently:
 * a server that cannot be reached stops the stage (nothing is recorded, a resume redoes the
 * work), while an HTTP error or a timeout belongs to the one sample and becomes its error row.
 */
import http from 'node:http';
import { sleep } from './pool.js';

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

/** Keep-alive agents per origin, sized by the caller's concurrency; node:http allocates far less per request than fetch. */
const agents = new Map<string, http.Agent>();
function agentFor(origin: string): http.Agent {
  let a = agents.get(origin);
  if (!a) agents.set(origin, (a = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096 })));
  return a;
}

/** One HTTP exchange: status and body text, or the transport error. */
function exchange(url: URL, payload: Buffer, signal: AbortSignal): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent: agentFor(url.origin),
        headers: { 'content-type': 'application/json', 'content-length': payload.length },
        signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

export async function postJson(url: string, body: unknown, opts: PostOptions): Promise<unknown> {
  // One controller per request, its listener removed when the request ends: AbortSignal.any
  // over a stage-long signal leaves a listener per request on it until GC (thousands at scale).
  const ctrl = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ctrl.abort(new RequestTimeoutError(url, opts.timeoutMs));
  }, opts.timeoutMs);
  const onAbort = (): void => ctrl.abort(opts.signal?.reason);
  if (opts.signal?.aborted) onAbort();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  let status: number;
  let text: string;
  try {
    const target = new URL(url);
    const payload = Buffer.from(JSON.stringify(body), 'utf8');
    if (target.protocol === 'http:') ({ status, text } = await exchange(target, payload, ctrl.signal));
    else {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: payload,
        signal: ctrl.signal,
      });
      status = res.status;
      text = await res.text();
    }
  } catch (err) {
    if (opts.signal?.aborted) throw opts.signal.reason ?? err;
    if (timedOut) throw new RequestTimeoutError(url, opts.timeoutMs);
    throw new ServerUnreachableError(url, err);
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
  if (status < 200 || status > 299) throw new HttpStatusError(status, errorMessage(text));
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
