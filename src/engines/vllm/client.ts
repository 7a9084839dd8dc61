/**
 * A small client for a vLLM OpenAI-compatible server's control calls (health, version,
 * models, metrics) and single non-streaming completions (smoke test, acceptance gate). Every
 * call has a timeout and takes an optional AbortSignal; transport failures are the same
 * SglangConnectionError the SGLang client throws, so the server watcher reads both alike.
 * Routes: vllm==0.32.0:vllm/entrypoints/openai/api_server.py (/health, /version, /v1/models,
 * /v1/completions) and vllm/entrypoints/metrics (Prometheus /metrics).
 */
import { errorMessageOf, httpRequest, SglangHttpError, type RawResponse } from '../../sglang/client.js';
import { specCounters, type SpecCounters } from './metrics.js';

export interface Completion {
  text: string;
  completionTokens: number;
  promptTokens: number;
}

export class VllmClient {
  readonly baseUrl: string;
  constructor(
    baseUrl: string,
    private readonly opts: { timeoutMs?: number; generateTimeoutMs?: number } = {},
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  private get timeoutMs(): number {
    return this.opts.timeoutMs ?? 30_000;
  }

  private async get(path: string, signal?: AbortSignal): Promise<RawResponse> {
    const raw = await httpRequest(this.baseUrl, 'GET', path, undefined, this.timeoutMs, signal);
    requireOk('GET', path, raw);
    return raw;
  }

  /** The HTTP status of /health, or null when nothing answered. Only exactly 200 counts as ready. */
  async health(signal?: AbortSignal): Promise<{ status: number | null; error?: string }> {
    try {
      return { status: (await httpRequest(this.baseUrl, 'GET', '/health', undefined, this.timeoutMs, signal)).status };
    } catch (err) {
      if ((err as Error).name === 'SglangConnectionError') return { status: null, error: (err as Error).message };
      throw err;
    }
  }

  /** The release the server reports (GET /version → {"version": "0.32.0"}). */
  async version(signal?: AbortSignal): Promise<string | undefined> {
    const body = await this.versionInfo(signal);
    return typeof body.version === 'string' ? body.version : undefined;
  }

  /** GET /version as it answered (aerie's simulator adds its aerie_sim mark there). */
  async versionInfo(signal?: AbortSignal): Promise<Record<string, unknown>> {
    return parse(await this.get('/version', signal), 'GET /version');
  }

  /** The models served (GET /v1/models): each id and the path it was loaded from (root). */
  async models(signal?: AbortSignal): Promise<{ id: string; root?: string }[]> {
    const body = parse(await this.get('/v1/models', signal), 'GET /v1/models') as { data?: unknown };
    if (!Array.isArray(body.data)) throw new Error('GET /v1/models answered without data');
    return body.data
      .filter((m): m is Record<string, unknown> => m !== null && typeof m === 'object')
      .map((m) => ({ id: String(m.id), ...(typeof m.root === 'string' ? { root: m.root } : {}) }));
  }

  /** The speculative counters now, or undefined when the server exports none (no speculative config). */
  async specCounters(signal?: AbortSignal): Promise<SpecCounters | undefined> {
    return specCounters((await this.get('/metrics', signal)).text);
  }

  /**
   * Token counts by the server's tokenizer (POST /tokenize takes one prompt:
   * vllm==0.32.0:vllm/entrypoints/serve/tokenize/protocol.py), in the shape aerie's load
   * generator takes: one count per prompt, or a problem when they could not be counted.
   */
  async countTokens(
    model: string,
    prompts: readonly string[],
    addSpecialTokens: boolean,
    signal?: AbortSignal,
  ): Promise<{ lens: number[] | undefined; problem?: string }> {
    const counts = new Map<string, number>();
    for (const prompt of new Set(prompts)) {
      if (prompt.length === 0 && !addSpecialTokens) {
        counts.set(prompt, 0);
        continue;
      }
      const raw = await httpRequest(
        this.baseUrl,
        'POST',
        '/tokenize',
        { model, prompt, add_special_tokens: addSpecialTokens },
        this.timeoutMs,
        signal,
      ).catch((err: Error) => ({ status: 0, text: err.message }));
      if (raw.status !== 200) return { lens: undefined, problem: `POST /tokenize answered ${raw.status || raw.text}` };
      const count = (JSON.parse(raw.text) as { count?: unknown }).count;
      if (!Number.isInteger(count)) return { lens: undefined, problem: 'POST /tokenize answered without a count' };
      counts.set(prompt, count as number);
    }
    return { lens: prompts.map((p) => counts.get(p) ?? 0) };
  }

  /** One chat completion (the model's chat template applied by the server), greedy by default. */
  async chat(
    req: { model: string; user: string; maxTokens: number; temperature?: number; ignoreEos?: boolean },
    signal?: AbortSignal,
  ): Promise<Completion> {
    const path = '/v1/chat/completions';
    const raw = await httpRequest(
      this.baseUrl,
      'POST',
      path,
      {
        model: req.model,
        messages: [{ role: 'user', content: req.user }],
        max_tokens: req.maxTokens,
        temperature: req.temperature ?? 0,
        ...(req.ignoreEos ? { ignore_eos: true } : {}),
        stream: false,
      },
      this.opts.generateTimeoutMs ?? 600_000,
      signal,
    );
    requireOk('POST', path, raw);
    const body = parse(raw, `POST ${path}`) as {
      choices?: { message?: { content?: unknown } }[];
      usage?: { completion_tokens?: unknown; prompt_tokens?: unknown };
    };
    const text = body.choices?.[0]?.message?.content;
    if (typeof text !== 'string') throw new Error(`POST ${path} answered without choices[0].message.content`);
    return {
      text,
      completionTokens: Number(body.usage?.completion_tokens ?? 0),
      promptTokens: Number(body.usage?.prompt_tokens ?? 0),
    };
  }

  /** One greedy (or sampled) completion of a text prompt. */
  async complete(
    req: { model: string; prompt: string; maxTokens: number; temperature?: number; ignoreEos?: boolean },
    signal?: AbortSignal,
  ): Promise<Completion> {
    const path = '/v1/completions';
    const raw = await httpRequest(
      this.baseUrl,
      'POST',
      path,
      {
        model: req.model,
        prompt: req.prompt,
        max_tokens: req.maxTokens,
        temperature: req.temperature ?? 0,
        ...(req.ignoreEos ? { ignore_eos: true } : {}),
        stream: false,
      },
      this.opts.generateTimeoutMs ?? 600_000,
      signal,
    );
    requireOk('POST', path, raw);
    const body = parse(raw, `POST ${path}`) as {
      choices?: { text?: unknown }[];
      usage?: { completion_tokens?: unknown; prompt_tokens?: unknown };
    };
    const text = body.choices?.[0]?.text;
    if (typeof text !== 'string') throw new Error(`POST ${path} answered without choices[0].text`);
    return {
      text,
      completionTokens: Number(body.usage?.completion_tokens ?? 0),
      promptTokens: Number(body.usage?.prompt_tokens ?? 0),
    };
  }
}

function requireOk(method: string, path: string, raw: RawResponse): void {
  if (raw.status < 200 || raw.status > 299)
    throw new SglangHttpError(method, path, raw.status, errorMessageOf(raw.text), raw.text);
}

function parse(raw: RawResponse, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(raw.text);
  } catch {
    throw new Error(`${what} answered HTTP ${raw.status} with a body that is not JSON: ${raw.text.slice(0, 200)}`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new Error(`${what} did not answer with a JSON object`);
  return v as Record<string, unknown>;
}
