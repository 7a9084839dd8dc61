/**
 * The HTTP front: routes, readiness, server/model info, cache flush. Request bodies for
 * generation go to api-native.ts and api-openai.ts. Response shapes follow SGLang's
 * http_server.py; the routes, the /health probe and the info bodies follow the imitated release
 * (profile.ts).
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CaptureWriter, HiddenStates } from './capture.js';
import type { Engine } from './engine.js';
import type { SimLM } from './lm.js';
import type { SimLog } from './log.js';
import type { AcceptPlan, ModelConfig } from './model.js';
import type { Resolved, SimEnv } from './settings.js';
import { deprecatedInfoRoute, hasInfoRoutes, healthRid, modelInfoHasArchitecture } from './profile.js';
import { type SimRelease, atLeast } from './release.js';
/** Marks the server's own warmup request, which the crash-first-decode fault spares. */
export const WARMUP_HEADER = 'x-aerie-sim-warmup';

export type Status = 'starting' | 'up' | 'shutting-down';

export interface ServerContext {
  log: SimLog;
  env: SimEnv;
  target: ModelConfig;
  resolved: Resolved;
  accept: AcceptPlan | null;
  engine: Engine;
  lm: SimLM;
  /** aerie's capture plugin, when it is loaded and installed (capture-start.ts). */
  capture: CaptureWriter | null;
  /** The model's hidden states, once the weights are loaded (capture or stock return_hidden_states). */
  states: HiddenStates | null;
  status: Status;
  startedAtSec: number;
}

export interface Exchange {
  ctx: ServerContext;
  req: http.IncomingMessage;
  res: http.ServerResponse;
  path: string;
  query: URLSearchParams;
  /** Parsed JSON body (POST/PUT), or undefined. */
  body: unknown;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** An error on an OpenAI route, answered with its ErrorResponse body; `type` as SGLang names it there. */
export class OpenAIError extends HttpError {
  constructor(
    status: number,
    message: string,
    readonly type: string,
  ) {
    super(status, message);
  }
}

function client(req: http.IncomingMessage): string {
  return `${req.socket.remoteAddress ?? '127.0.0.1'}:${req.socket.remotePort ?? 0}`;
}

/** Write status + headers once, logging the access line as uvicorn does when a response starts. */
export function startResponse(x: Exchange, status: number, contentType: string): void {
  if (x.res.headersSent) return;
  x.res.writeHead(status, { 'content-type': contentType });
  x.ctx.log.access(client(x.req), x.req.method ?? 'GET', x.req.url ?? '/', status);
}

export function sendJson(x: Exchange, status: number, value: unknown): void {
  startResponse(x, status, 'application/json');
  x.res.end(JSON.stringify(value));
}

export function sendText(x: Exchange, status: number, text: string): void {
  startResponse(x, status, 'text/plain; charset=utf-8');
  x.res.end(text);
}

export function sendEmpty(x: Exchange, status: number): void {
  startResponse(x, status, 'text/plain; charset=utf-8');
  x.res.end();
}

/** SGLang's _create_error_response (sglang==0.5.23:srt/entrypoints/http_server.py; the same in 0.5.4-0.5.23). */
export function sendError(x: Exchange, status: number, message: string): void {
  sendJson(x, status, { error: { message } });
}

/**
 * The OpenAI routes' ErrorResponse, the same in 0.5.4-0.5.23
 * (sglang==0.5.4:srt/entrypoints/openai/protocol.py:67-72, serving_base.py:200-216;
 * sglang==0.5.23:srt/entrypoints/openai/protocol.py:106-111, serving_base.py:205-221).
 */
export function openaiErrorBody(message: string, type: string, code: number): Record<string, unknown> {
  return { object: 'error', message, type, param: null, code };
}

export function startSse(x: Exchange): void {
  startResponse(x, 200, 'text/event-stream');
}

export function sseData(x: Exchange, value: unknown): void {
  if (!x.res.writableEnded) x.res.write(`data: ${typeof value === 'string' ? value : JSON.stringify(value)}\n\n`);
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

type Handler = (x: Exchange) => Promise<void> | void;

export interface Routes {
  [path: string]: { methods: string[]; handler: Handler };
}

export function createHttpServer(ctx: ServerContext, extra: Routes): http.Server {
  const routes: Routes = { ...coreRoutes(ctx.env.release), ...extra };
  return http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://sim');
      const x: Exchange = { ctx, req, res, path: url.pathname, query: url.searchParams, body: undefined };
      try {
        const route = routes[url.pathname];
        if (!route) return sendJson(x, 404, { detail: 'Not Found' });
        if (!route.methods.includes(req.method ?? 'GET')) return sendJson(x, 405, { detail: 'Method Not Allowed' });
        if (req.method === 'POST' || req.method === 'PUT') {
          const text = await readBody(req);
          if (text.trim() !== '') {
            try {
              x.body = JSON.parse(text);
            } catch (e) {
              // FastAPI's RequestValidationError (json_invalid), which SGLang answers with an ErrorResponse on
              // every route (sglang==0.5.4:srt/entrypoints/http_server.py:348-381; sglang==0.5.23:…:635-690).
              throw new OpenAIError(400, `JSON decode error: ${(e as Error).message}`, 'Bad Request');
            }
          }
        }
        await route.handler(x);
      } catch (e) {
        if (res.headersSent) {
          res.end();
          return;
        }
        if (e instanceof OpenAIError) sendJson(x, e.status, openaiErrorBody(e.message, e.type, e.status));
        else if (e instanceof HttpError) sendError(x, e.status, e.message);
        else sendError(x, 500, `Internal server error: ${(e as Error).message}`);
      }
    })();
  });
}

function coreRoutes(release: SimRelease): Routes {
  const get = (handler: Handler) => ({ methods: ['GET'], handler });
  const deprecated =
    (handler: Handler): Handler =>
    (x) => {
      const warning = deprecatedInfoRoute(x.ctx.env.release, x.path);
      if (warning) x.ctx.log.warning(warning);
      return handler(x);
    };
  const routes: Routes = {
    '/health': get(health),
    '/health_generate': get(health),
    '/get_model_info': get(deprecated((x) => sendJson(x, 200, modelInfo(x.ctx)))),
    '/get_server_info': get(deprecated((x) => sendJson(x, 200, serverInfo(x.ctx)))),
    '/v1/models': get((x) => sendJson(x, 200, models(x.ctx))),
    '/flush_cache': { methods: ['GET', 'POST'], handler: flushCache },
  };
  if (hasInfoRoutes(release)) {
    routes['/model_info'] = get((x) => sendJson(x, 200, modelInfo(x.ctx)));
    routes['/server_info'] = get((x) => sendJson(x, 200, serverInfo(x.ctx)));
  }
  return routes;
}

/**
 * 503 while starting or shutting down; otherwise 200 once any output follows a 1-token probe
 * (the same loop in every release: sglang==0.5.4:srt/entrypoints/http_server.py:403-472), except
 * plain /health where the release lets SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION skip it.
 */
async function health(x: Exchange): Promise<void> {
  const { ctx } = x;
  if (ctx.status === 'shutting-down') {
    ctx.log.info('Health check request received during shutdown. Returning 503.');
    return sendEmpty(x, 503);
  }
  if (ctx.status === 'starting') return sendEmpty(x, 503);
  if (ctx.env.healthSkipsProbe && x.path === '/health') return sendEmpty(x, 200);
  const tic = performance.now();
  // input_ids [0] and a HEALTH_CHECK_ rid (sglang==0.5.23:srt/entrypoints/http_server.py:754-762).
  const rid = healthRid(ctx.env.release);
  const probe = ctx.engine.submit({
    rid,
    key: 'health',
    promptTokens: 1,
    promptUnits: ['0'],
    context: [0],
    bareFirst: false,
    // aerie's capture skips SGLang's own health probes (py/aerie_hs/sglang_hook.py _HEALTH_PREFIX): no dump.
    onPrefill: undefined,
    params: {
      max_new_tokens: 1,
      min_new_tokens: 0,
      temperature: 0,
      top_p: 1,
      top_k: -1,
      min_p: 0,
      frequency_penalty: 0,
      presence_penalty: 0,
      repetition_penalty: 1,
      stop: [],
      stop_token_ids: [],
      ignore_eos: false,
      skip_special_tokens: true,
      no_stop_trim: false,
      n: 1,
      sampling_seed: null,
    },
    kind: 'health',
  });
  // SGLang checks once a second for any scheduler output newer than the probe.
  const poll = Math.max(5, 1000 * ctx.env.timeScale);
  const deadline = tic + ctx.env.healthTimeoutS * 1000;
  while (performance.now() < deadline) {
    await sleep(poll);
    if (ctx.engine.lastOutputAt > tic) {
      ctx.engine.abort(probe);
      return sendEmpty(x, ctx.status === 'up' ? 200 : 503);
    }
  }
  ctx.engine.abort(probe);
  ctx.log.error(
    `Health check failed. Server couldn't get a response from detokenizer for last ${ctx.env.healthTimeoutS} seconds.`,
  );
  return sendEmpty(x, 503);
}

export function modelInfo(ctx: ServerContext): Record<string, unknown> {
  const a = ctx.resolved.args;
  const base = {
    model_path: a.model_path,
    tokenizer_path: a.tokenizer_path,
    is_generation: true,
    preferred_sampling_params: null,
    weight_version: a.weight_version,
  };
  if (!modelInfoHasArchitecture(ctx.env.release)) return base;
  // 0.5.23 adds the served name and four launch choices (sglang==0.5.23:srt/entrypoints/http_server.py:816-836).
  const more = atLeast(ctx.env.release, '0.5.23')
    ? {
        served_model_name: a.served_model_name,
        load_format: a.load_format ?? 'auto',
        reasoning_parser: a.reasoning_parser ?? null,
        tool_call_parser: a.tool_call_parser ?? null,
        disaggregation_mode: a.disaggregation_mode ?? 'null',
      }
    : {};
  return {
    ...base,
    ...more,
    has_image_understanding: false,
    has_audio_understanding: false,
    model_type: ctx.target.modelType,
    architectures: ctx.target.architectures,
  };
}

export function serverInfo(ctx: ServerContext): Record<string, unknown> {
  const r = ctx.resolved;
  const state: Record<string, unknown> = {
    last_gen_throughput: ctx.engine.lastGenThroughput,
    memory_usage: {
      weight: Number(r.memory.weights.toFixed(2)),
      kvcache: Number(r.memory.kvGiB.toFixed(2)),
      token_capacity: r.maxTotalTokens,
      graph: r.args.disable_cuda_graph ? 0 : 0.54,
    },
    effective_max_running_requests_per_dp: r.maxRunning,
    '#running-req': ctx.engine.numRunning,
    '#queue-req': ctx.engine.numWaiting,
  };
  const avg = ctx.engine.avgSpecAcceptLength;
  if (avg !== null) state.avg_spec_accept_length = avg;
  return {
    ...r.args,
    max_total_num_tokens: r.maxTotalTokens,
    max_req_input_len: r.maxReqInputLen,
    internal_states: [state],
    version: ctx.env.release,
    // Not SGLang's: the simulator says what it is, so a report taken against it is labelled
    // SIMULATED from the server's own word (src/bench/simulated.ts), not from aerie's config.
    aerie_sim: { name: 'aerie-sim', release: ctx.env.release },
  };
}

function models(ctx: ServerContext): Record<string, unknown> {
  const name = ctx.resolved.args.served_model_name;
  return {
    object: 'list',
    data: [
      {
        id: name,
        object: 'model',
        created: ctx.startedAtSec,
        owned_by: 'sglang',
        root: name,
        parent: null,
        max_model_len: ctx.resolved.contextLen,
      },
    ],
  };
}

const FLUSH_TEXT =
  'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n';

function flushCache(x: Exchange): void {
  sendText(x, x.ctx.engine.flush() ? 200 : 400, FLUSH_TEXT);
}
