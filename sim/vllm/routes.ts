/**
 * The HTTP side of `aerie-sim vllm`: the routes vLLM 0.32.0's API server answers, their methods,
 * and the handlers of all but the completions (generate.ts).
 */
import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import { chatMessages } from '../sglang/api-openai.js';
import { HttpError } from '../sglang/http.js';
import { renderChat } from '../sglang/text.js';
import { ApiError, type Body, bodyOf, checkModel } from './api.js';
import type { VllmServer } from './context.js';
import { VLLM_VERSION } from './context.js';
import { generate } from './generate.js';
import { renderMetrics } from './metrics.js';

export const ROUTES = [
  ['/openapi.json', 'GET, HEAD'],
  ['/docs', 'GET, HEAD'],
  ['/version', 'GET'],
  ['/health', 'GET'],
  ['/metrics', 'GET'],
  ['/tokenize', 'POST'],
  ['/detokenize', 'POST'],
  ['/v1/models', 'GET'],
  ['/v1/chat/completions', 'POST'],
  ['/v1/completions', 'POST'],
];

/** The request handler of the server startup.ts listens with. */
export function httpHandler(srv: VllmServer): (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> {
  const { engine, lm, log, metrics, startTimeS } = srv;
  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://sim');
    const client = `${req.socket.remoteAddress ?? '127.0.0.1'}:${req.socket.remotePort ?? 0}`;
    const head = (code: number, type: string) => {
      if (res.headersSent) return;
      res.writeHead(code, { 'content-type': type });
      log.access(client, req.method ?? 'GET', req.url ?? '/', code);
    };
    const json = (code: number, v: unknown) => {
      head(code, 'application/json');
      res.end(JSON.stringify(v));
    };
    const error = (e: ApiError) =>
      json(e.status, { error: { message: e.message, type: e.type, param: e.param, code: e.status } });
    const routes: Record<string, string[]> = Object.fromEntries(ROUTES.map(([p, m]) => [p, m!.split(', ')]));
    const allowed = routes[url.pathname];
    if (!allowed) return json(404, { detail: 'Not Found' });
    if (!allowed.includes(req.method ?? 'GET')) return json(405, { detail: 'Method Not Allowed' });
    let body: Body = {};
    if (req.method === 'POST') {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() !== '') {
        try {
          body = bodyOf(JSON.parse(text));
        } catch (e) {
          return error(new ApiError(400, `JSON decode error: ${(e as Error).message}`, 'BadRequestError'));
        }
      }
    }
    try {
      switch (url.pathname) {
        case '/health':
          // entrypoints/serve/instrumentator/health.py:22-33: 200 with an empty body, 503 once the engine is dead.
          head(srv.status === 'up' ? 200 : 503, 'application/json');
          return void res.end();
        case '/version':
          // The real answer is {"version"} alone; the simulator marks itself beside it, as its SGLang
          // profile does in /server_info, so a report never passes simulated figures off as real.
          return json(200, { version: VLLM_VERSION, aerie_sim: { name: 'aerie-sim vllm', release: VLLM_VERSION } });
        case '/v1/models':
          return json(200, models(srv));
        case '/metrics':
          metrics.running = engine.numRunning;
          metrics.waiting = engine.numWaiting;
          head(200, 'text/plain; version=0.0.4; charset=utf-8');
          return void res.end(renderMetrics(metrics, startTimeS));
        case '/tokenize':
          return json(200, tokenize(srv, body));
        case '/detokenize': {
          const t = Array.isArray(body.tokens) ? (body.tokens as unknown[]).map(Number) : [];
          return json(200, { prompt: lm.tok.decode(t) });
        }
        case '/v1/completions':
        case '/v1/chat/completions':
          return await generate(srv, url.pathname === '/v1/chat/completions', body, res, head, json);
      }
    } catch (e) {
      if (res.headersSent) return void res.end();
      if (e instanceof ApiError) return error(e);
      if (e instanceof HttpError) return error(new ApiError(400, e.message, 'BadRequestError'));
      return error(new ApiError(500, (e as Error).message, 'InternalServerError'));
    }
  };
  return handle;
}

function models(srv: VllmServer) {
  const { a, maxModelLen, servedNames } = srv;
  const created = Math.floor(Date.now() / 1000);
  return {
    object: 'list',
    data: servedNames.map((id) => ({
      id,
      object: 'model',
      created,
      owned_by: 'vllm',
      root: a.model,
      parent: null,
      max_model_len: maxModelLen,
      permission: [
        {
          id: `modelperm-${randomBytes(8).toString('hex')}`,
          object: 'model_permission',
          created,
          allow_create_engine: false,
          allow_sampling: true,
          allow_logprobs: true,
          allow_search_indices: false,
          allow_view: true,
          allow_fine_tuning: false,
          organization: '*',
          group: null,
          is_blocking: false,
        },
      ],
    })),
  };
}

/** POST /tokenize: one prompt, or chat messages (vllm==0.32.0:vllm/entrypoints/serve/tokenize/protocol.py). */
function tokenize(srv: VllmServer, body: Body) {
  const { lm, maxModelLen } = srv;
  checkModel(srv, body);
  const special = body.add_special_tokens !== false;
  let tokens: number[];
  if (Array.isArray(body.messages)) tokens = lm.tok.encode(renderChat(chatMessages(body)), false);
  else if (typeof body.prompt === 'string') tokens = lm.tok.encode(body.prompt, special);
  else throw new ApiError(400, '1 validation error for TokenizeRequest\nprompt\n  Field required', 'BadRequestError');
  return { count: tokens.length, max_model_len: maxModelLen, tokens, token_strs: null };
}
