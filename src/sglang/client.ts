/**
 * A small client for SGLang's control calls (health, server_info, model_info, flush_cache)
 * and single non-streaming generations (smoke tests, acceptance gates). Every call has a
 * timeout and takes an optional AbortSignal. Load generation lives in src/bench, not here.
 */
import type { ChatRequest, ChatResponse, GenerateRequest, GenerateResponse, MetaInfo, ModelInfo } from './types.js';

export type * from './types.js';

/** The server answered, with a status other than 2xx. */
export class SglangHttpError extends Error {
  override readonly name = 'SglangHttpError';
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    /** The server's own error text, taken from its JSON error body when it has one. */
    readonly serverMessage: string,
    readonly body: string,
  ) {
    super(`${method} ${path} answered HTTP ${status}${serverMessage ? `: ${serverMessage}` : ''}`);
  }
}

export type ConnectionFailure = 'refused' | 'timeout' | 'reset' | 'other';

/** No HTTP answer at all: nothing listening, the connection dropped, or the call timed out. */
export class SglangConnectionError extends Error {
  override readonly name = 'SglangConnectionError';
  constructor(
    readonly method: string,
    readonly path: string,
    readonly failure: ConnectionFailure,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`${method} ${path}: ${detail}`, options);
  }
}

export interface SglangClientOptions {
  /** Timeout for control calls (health, info, flush). Default 30 s: a health probe may take 20 s on a busy server. */
  timeoutMs?: number;
  /** Timeout for generate and chat. Default 10 minutes. */
  generateTimeoutMs?: number;
  /**
   * Ask /get_server_info and /get_model_info first, for a release known to serve only those
   * (releases.ts legacyInfoRoutesFirst: 0.5.4); the other name is still the fallback on a 404.
   */
  legacyRoutesFirst?: boolean;
}

export type HealthEndpoint = '/health' | '/health_generate';

export interface RawResponse {
  status: number;
  text: string;
}

/**
 * The message inside an SGLang error body: `{"error": {"message"}}` (stream errors, newer
 * handlers), `{"object": "error", "message"}` (OpenAI-style ErrorResponse), FastAPI's
 * `{"detail"}`, or the text itself.
 */
export function errorMessageOf(body: string): string {
  const text = body.trim();
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object') {
      const o = parsed as Record<string, unknown>;
      const nested = o.error;
      if (nested && typeof nested === 'object' && typeof (nested as Record<string, unknown>).message === 'string') {
        return (nested as Record<string, string>).message;
      }
      if (typeof nested === 'string') return nested;
      if (typeof o.message === 'string') return o.message;
      if (typeof o.detail === 'string') return o.detail;
      if (Array.isArray(o.detail)) {
        return o.detail
          .map((d) =>
            d && typeof d === 'object' && typeof (d as Record<string, unknown>).msg === 'string'
              ? (d as Record<string, string>).msg
              : JSON.stringify(d),
          )
          .join('; ');
      }
    }
  } catch {
    // Not JSON: the text is the message.
  }
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

function failureOf(err: unknown): { failure: ConnectionFailure; detail: string } {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const code = cause?.code ?? (err as { code?: string }).code;
  if (code === 'ECONNREFUSED') return { failure: 'refused', detail: 'connection refused (nothing is listening)' };
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE') {
    return { failure: 'reset', detail: `the connection was dropped (${code})` };
  }
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return { failure: 'timeout', detail: `no answer in time (${code})` };
  }
  const text = cause?.message ?? (err as Error).message ?? String(err);
  return { failure: 'other', detail: code ? `${text} (${code})` : text };
}

function asObject(value: unknown, what: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error(`${what} did not answer with a JSON object`);
  }
  return value as Record<string, unknown>;
}

function parseJson(raw: RawResponse, what: string): unknown {
  try {
    return JSON.parse(raw.text);
  } catch {
    throw new Error(`${what} answered HTTP ${raw.status} with a body that is not JSON: ${raw.text.slice(0, 200)}`);
  }
}

export class SglangClient {
  readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly generateTimeoutMs: number;
  private readonly legacyRoutesFirst: boolean;

  constructor(baseUrl: string, opts: SglangClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.generateTimeoutMs = opts.generateTimeoutMs ?? 600_000;
    this.legacyRoutesFirst = opts.legacyRoutesFirst ?? false;
  }

  /**
   * The HTTP status of a health endpoint, or status null when nothing answered (refused,
   * dropped, timed out). Never throws for transport errors; readiness requires exactly 200,
   * and that decision belongs to the caller. An abort by the caller's signal does throw.
   */
  async health(endpoint: HealthEndpoint, signal?: AbortSignal): Promise<{ status: number | null; error?: string }> {
    try {
      const raw = await this.request('GET', endpoint, undefined, this.timeoutMs, signal);
      return { status: raw.status };
    } catch (err) {
      if (err instanceof SglangConnectionError) return { status: null, error: err.message };
      throw err;
    }
  }

  /** Server args merged with scheduler info, internal_states and version. */
  async serverInfo(signal?: AbortSignal): Promise<Record<string, unknown>> {
    // 0.5.9 on serve /server_info and the old /get_server_info; 0.5.4 only the old one (releases.ts).
    return this.getJsonWithFallback('/server_info', '/get_server_info', signal);
  }

  async modelInfo(signal?: AbortSignal): Promise<ModelInfo> {
    const info = await this.getJsonWithFallback('/model_info', '/get_model_info', signal);
    return info as ModelInfo;
  }

  /**
   * Empties the radix cache (and resets the running accept-length average). SGLang refuses
   * with 400 while requests are in flight, and its 400 body still says "Cache flushed", so
   * the error says what actually happened.
   */
  async flushCache(signal?: AbortSignal): Promise<string> {
    const raw = await this.request('POST', '/flush_cache', undefined, this.timeoutMs, signal);
    if (raw.status === 400) {
      throw new SglangHttpError(
        'POST',
        '/flush_cache',
        400,
        'the server did not flush its cache: requests are still running or waiting',
        raw.text,
      );
    }
    this.requireOk('POST', '/flush_cache', raw);
    return raw.text;
  }

  async generate(req: GenerateRequest, signal?: AbortSignal): Promise<GenerateResponse> {
    if (Array.isArray((req as { text?: unknown }).text))
      throw new Error('generate takes one prompt; a list of prompts changes the response shape');
    const raw = await this.request('POST', '/generate', { ...req, stream: false }, this.generateTimeoutMs, signal);
    this.requireOk('POST', '/generate', raw);
    const body = asObject(parseJson(raw, 'POST /generate'), 'POST /generate');
    asObject(body.meta_info, 'POST /generate meta_info');
    return body as unknown as GenerateResponse;
  }

  async chat(req: ChatRequest, signal?: AbortSignal): Promise<ChatResponse> {
    const payload = { ...req, model: req.model ?? 'default', stream: false };
    const raw = await this.request('POST', '/v1/chat/completions', payload, this.generateTimeoutMs, signal);
    this.requireOk('POST', '/v1/chat/completions', raw);
    const body = asObject(parseJson(raw, 'POST /v1/chat/completions'), 'POST /v1/chat/completions');
    if (!Array.isArray(body.choices)) throw new Error('POST /v1/chat/completions answered without choices');
    return body as unknown as ChatResponse;
  }

  private async getJsonWithFallback(
    newPath: string,
    oldPath: string,
    signal?: AbortSignal,
  ): Promise<Record<string, unknown>> {
    const [first, second] = this.legacyRoutesFirst ? [oldPath, newPath] : [newPath, oldPath];
    let used = first;
    let raw = await this.request('GET', first, undefined, this.timeoutMs, signal);
    if (raw.status === 404) {
      used = second;
      raw = await this.request('GET', second, undefined, this.timeoutMs, signal);
    }
    this.requireOk('GET', used, raw);
    return asObject(parseJson(raw, `GET ${used}`), `GET ${used}`);
  }

  private requireOk(method: string, path: string, raw: RawResponse): void {
    if (raw.status < 200 || raw.status > 299) {
      throw new SglangHttpError(method, path, raw.status, errorMessageOf(raw.text), raw.text);
    }
  }

  private request(
    method: string,
    path: string,
    body: unknown,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<RawResponse> {
    return httpRequest(this.baseUrl, method, path, body, timeoutMs, signal);
  }
}

/**
 * One request, body read in full, bounded by timeoutMs (headers and body alike). Shared by the
 * engines' clients (src/engines/vllm/client.ts): a transport failure is an SglangConnectionError
 * whichever engine answered, so the server watcher reads them alike.
 */
export async function httpRequest(
  baseUrl: string,
  method: string,
  path: string,
  body: unknown,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<RawResponse> {
  signal?.throwIfAborted();
  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  try {
    const res = await fetch(baseUrl + path, {
      method,
      signal: combined,
      headers: body === undefined ? undefined : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    if (timeout.aborted) {
      throw new SglangConnectionError(method, path, 'timeout', `timed out after ${timeoutMs} ms`, { cause: err });
    }
    const { failure, detail } = failureOf(err);
    throw new SglangConnectionError(method, path, failure, detail, { cause: err });
  }
}

function finiteNumber(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/**
 * Accept length of one request: tokens committed per verify step, bonus token included.
 * Old versions report only spec_verify_ct, so it is computed the way newer ones do.
 * undefined for a non-speculative server (no verify steps).
 */
export function acceptLengthOf(meta: MetaInfo): number | undefined {
  const direct = finiteNumber(meta.spec_accept_length);
  if (direct !== undefined && direct > 0) return direct;
  const verify = finiteNumber(meta.spec_verify_ct);
  const completion = finiteNumber(meta.completion_tokens);
  if (verify === undefined || completion === undefined || verify <= 0) return undefined;
  return completion / verify;
}

/**
 * The server's running average accept length (cumulative since start or the last flush,
 * refreshed every decode_log_interval steps). Newer versions keep it per DP rank in
 * internal_states; some older ones put it at the top level; absent until something was accepted.
 */
export function avgSpecAcceptLength(serverInfo: Record<string, unknown>): number | undefined {
  const states = serverInfo.internal_states;
  if (Array.isArray(states) && states.length > 0 && states[0] && typeof states[0] === 'object') {
    const v = finiteNumber((states[0] as Record<string, unknown>).avg_spec_accept_length);
    if (v !== undefined) return v;
  }
  return finiteNumber(serverInfo.avg_spec_accept_length);
}
