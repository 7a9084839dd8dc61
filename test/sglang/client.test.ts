import type http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import {
  SglangClient,
  SglangConnectionError,
  SglangHttpError,
  acceptLengthOf,
  avgSpecAcceptLength,
  errorMessageOf,
  type MetaInfo,
} from '../../src/sglang/client.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { startFakeServer, type FakeServer } from '../support/fake-server.js';

interface Seen {
  method: string;
  url: string;
  contentType?: string;
  body: string;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

const servers: FakeServer[] = [];

/** A real HTTP server on a port the OS picks (test/support's fake server); every test's servers are closed after it. */
async function serve(handler: Handler): Promise<{ base: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = await startFakeServer((body, res, req) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', contentType: req.headers['content-type'], body });
    handler(req, res, body);
  });
  servers.push(server);
  return { base: server.baseUrl, seen };
}

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

function json(res: http.ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

/** A port that was just free. */
const closedPort = freePort;

const META: MetaInfo = {
  id: 'a1b2',
  finish_reason: { type: 'length', length: 16 },
  prompt_tokens: 6,
  completion_tokens: 16,
  cached_tokens: 0,
  e2e_latency: 0.21,
  spec_verify_ct: 5,
};

describe('SglangClient.health', () => {
  it('reports 503 while the server is starting and 200 when ready', async () => {
    let ready = false;
    const { base, seen } = await serve((_req, res) => {
      res.writeHead(ready ? 200 : 503);
      res.end();
    });
    const client = new SglangClient(base + '/');
    expect(await client.health('/health')).toEqual({ status: 503 });
    ready = true;
    expect(await client.health('/health_generate')).toEqual({ status: 200 });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual(['GET /health', 'GET /health_generate']);
  });

  it('reports status null, not an exception, when the connection is refused', async () => {
    const port = await closedPort();
    const result = await new SglangClient(`http://127.0.0.1:${port}`).health('/health');
    expect(result.status).toBeNull();
    expect(result.error).toMatch(/connection refused/);
  });

  it('reports status null when the server does not answer within the timeout', async () => {
    const { base } = await serve(() => {
      // Never answers: the request hangs until the client gives up.
    });
    const started = Date.now();
    const result = await new SglangClient(base, { timeoutMs: 300 }).health('/health');
    const elapsed = Date.now() - started;
    expect(result).toEqual({ status: null, error: 'GET /health: timed out after 300 ms' });
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(10_000);
  });

  it("throws when the caller's signal aborts", async () => {
    const { base } = await serve(() => {});
    const controller = new AbortController();
    const pending = new SglangClient(base, { timeoutMs: 30_000 }).health('/health', controller.signal);
    setTimeout(() => controller.abort(), 50);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  });
});

describe('SglangClient.serverInfo and modelInfo', () => {
  it('uses /server_info when the server has it', async () => {
    const { base, seen } = await serve((req, res) =>
      json(res, 200, { model_path: '/m', port: 30000, internal_states: [] }),
    );
    expect(await new SglangClient(base).serverInfo()).toEqual({ model_path: '/m', port: 30000, internal_states: [] });
    expect(seen.map((s) => s.url)).toEqual(['/server_info']);
  });

  it('falls back to /get_server_info on an older server that answers 404', async () => {
    const { base, seen } = await serve((req, res) => {
      if (req.url === '/get_server_info') json(res, 200, { model_path: '/m', port: 30000, version: '0.4.3' });
      else json(res, 404, { detail: 'Not Found' });
    });
    expect(await new SglangClient(base).serverInfo()).toEqual({ model_path: '/m', port: 30000, version: '0.4.3' });
    expect(seen.map((s) => s.url)).toEqual(['/server_info', '/get_server_info']);
  });

  it('raises SglangHttpError when neither name exists (not an SGLang server)', async () => {
    const { base } = await serve((_req, res) => json(res, 404, { detail: 'Not Found' }));
    const err = await new SglangClient(base).serverInfo().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SglangHttpError);
    expect(err).toMatchObject({ status: 404, path: '/get_server_info', serverMessage: 'Not Found' });
  });

  it('refuses a 200 that is not a JSON object', async () => {
    const { base } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>hello</html>');
    });
    await expect(new SglangClient(base).serverInfo()).rejects.toThrow(
      /GET \/server_info answered HTTP 200 with a body that is not JSON/,
    );
  });

  it('falls back from /model_info to /get_model_info', async () => {
    const { base, seen } = await serve((req, res) => {
      if (req.url === '/get_model_info')
        json(res, 200, { model_path: '/m', tokenizer_path: '/m', is_generation: true });
      else json(res, 404, { detail: 'Not Found' });
    });
    expect(await new SglangClient(base).modelInfo()).toEqual({
      model_path: '/m',
      tokenizer_path: '/m',
      is_generation: true,
    });
    expect(seen.map((s) => s.url)).toEqual(['/model_info', '/get_model_info']);
  });

  it('asks the old names first for a release that serves only those (0.5.4), and still falls back', async () => {
    const { base, seen } = await serve((req, res) => {
      if (req.url === '/get_server_info' || req.url === '/get_model_info')
        json(res, 200, { model_path: '/m', port: 30000, version: '0.5.4' });
      else json(res, 404, { detail: 'Not Found' });
    });
    const client = new SglangClient(base, { legacyRoutesFirst: true });
    expect(await client.serverInfo()).toMatchObject({ version: '0.5.4' });
    await client.modelInfo();
    expect(seen.map((s) => s.url)).toEqual(['/get_server_info', '/get_model_info']);

    const { base: newer, seen: seenNewer } = await serve((req, res) => {
      if (req.url === '/server_info') json(res, 200, { model_path: '/m', port: 30000 });
      else json(res, 404, { detail: 'Not Found' });
    });
    await new SglangClient(newer, { legacyRoutesFirst: true }).serverInfo();
    expect(seenNewer.map((s) => s.url)).toEqual(['/get_server_info', '/server_info']);
  });
});

describe('SglangClient.generate and chat', () => {
  it('posts a non-streaming /generate as JSON and returns text and meta_info', async () => {
    const { base, seen } = await serve((_req, res) =>
      json(res, 200, { text: ' Paris.', output_ids: [12366, 13], meta_info: META }),
    );
    const out = await new SglangClient(base).generate({
      text: 'The capital of France is',
      sampling_params: { max_new_tokens: 16, temperature: 0 },
    });
    expect(out.text).toBe(' Paris.');
    expect(acceptLengthOf(out.meta_info)).toBeCloseTo(3.2);
    expect(seen[0].method).toBe('POST');
    expect(seen[0].contentType).toBe('application/json');
    expect(JSON.parse(seen[0].body)).toEqual({
      text: 'The capital of France is',
      sampling_params: { max_new_tokens: 16, temperature: 0 },
      stream: false,
    });
  });

  it("turns a 400 into SglangHttpError carrying the server's message", async () => {
    const { base } = await serve((_req, res) =>
      json(res, 400, {
        error: { message: "The input (131090 tokens) is longer than the model's context length (131072 tokens)." },
      }),
    );
    const err = await new SglangClient(base).generate({ text: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SglangHttpError);
    expect(err).toMatchObject({
      status: 400,
      method: 'POST',
      path: '/generate',
      serverMessage: "The input (131090 tokens) is longer than the model's context length (131072 tokens).",
    });
    expect((err as Error).message).toBe(
      "POST /generate answered HTTP 400: The input (131090 tokens) is longer than the model's context length (131072 tokens).",
    );
  });

  it('honours the generate timeout even when the body stalls after the headers', async () => {
    const { base } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"text": "Par');
    });
    const started = Date.now();
    const err = await new SglangClient(base, { generateTimeoutMs: 300 })
      .generate({ text: 'x' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SglangConnectionError);
    expect(err).toMatchObject({ failure: 'timeout', path: '/generate' });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('reports a dropped connection as SglangConnectionError (a server dying mid-request)', async () => {
    const { base } = await serve((req) => req.socket.destroy());
    const err = await new SglangClient(base).generate({ text: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SglangConnectionError);
    expect((err as SglangConnectionError).failure).toBe('reset');
  });

  it('posts a non-streaming chat completion with a model name', async () => {
    const reply = {
      id: 'c1',
      object: 'chat.completion',
      created: 1751364000,
      model: 'default',
      choices: [
        { index: 0, message: { role: 'assistant', content: 'Paris.' }, finish_reason: 'stop', matched_stop: 128009 },
      ],
      usage: { prompt_tokens: 42, completion_tokens: 3, total_tokens: 45 },
    };
    const { base, seen } = await serve((_req, res) => json(res, 200, reply));
    const out = await new SglangClient(base).chat({
      messages: [{ role: 'user', content: 'Capital of France?' }],
      max_tokens: 8,
    });
    expect(out).toEqual(reply);
    expect(seen[0].url).toBe('/v1/chat/completions');
    expect(seen[0].contentType).toBe('application/json');
    expect(JSON.parse(seen[0].body)).toEqual({
      messages: [{ role: 'user', content: 'Capital of France?' }],
      max_tokens: 8,
      model: 'default',
      stream: false,
    });
  });

  it('refuses a list of prompts', async () => {
    await expect(new SglangClient('http://127.0.0.1:1').generate({ text: ['a', 'b'] } as never)).rejects.toThrow(
      /one prompt/,
    );
  });
});

describe('SglangClient.flushCache', () => {
  it('returns the text on 200 and explains a 400 while requests are in flight', async () => {
    let busy = false;
    const text =
      'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n';
    const { base, seen } = await serve((_req, res) => {
      res.writeHead(busy ? 400 : 200, { 'content-type': 'text/plain' });
      res.end(text);
    });
    const client = new SglangClient(base);
    expect(await client.flushCache()).toBe(text);
    busy = true;
    const err = await client.flushCache().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SglangHttpError);
    expect(err).toMatchObject({
      status: 400,
      serverMessage: 'the server did not flush its cache: requests are still running or waiting',
    });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual(['POST /flush_cache', 'POST /flush_cache']);
  });
});

describe('errorMessageOf', () => {
  it('reads every error body shape SGLang uses', () => {
    expect(errorMessageOf('{"error": {"message": "bad"}}')).toBe('bad');
    expect(
      errorMessageOf('{"object": "error", "message": "Bad Request: max_tokens", "type": "BadRequest", "code": 400}'),
    ).toBe('Bad Request: max_tokens');
    expect(errorMessageOf('{"detail": "Not Found"}')).toBe('Not Found');
    expect(errorMessageOf('{"detail": [{"loc": ["body"], "msg": "field required"}]}')).toBe('field required');
    expect(errorMessageOf('Internal Server Error')).toBe('Internal Server Error');
  });
});

describe('acceptLengthOf', () => {
  it('prefers spec_accept_length, else completion_tokens / spec_verify_ct, else undefined', () => {
    expect(acceptLengthOf({ ...META, spec_accept_length: 2.75 })).toBe(2.75);
    expect(acceptLengthOf(META)).toBe(16 / 5);
    expect(acceptLengthOf({ ...META, spec_verify_ct: 0 })).toBeUndefined();
    const { spec_verify_ct: _unused, ...plain } = META;
    expect(acceptLengthOf(plain as MetaInfo)).toBeUndefined();
  });
});

describe('avgSpecAcceptLength', () => {
  it('reads internal_states[0], falls back to the old top-level field, else undefined', () => {
    expect(
      avgSpecAcceptLength({ internal_states: [{ avg_spec_accept_length: 3.4 }, { avg_spec_accept_length: 2.9 }] }),
    ).toBe(3.4);
    expect(avgSpecAcceptLength({ avg_spec_accept_length: 2.2 })).toBe(2.2);
    expect(avgSpecAcceptLength({ internal_states: [{ last_gen_throughput: 10 }] })).toBeUndefined();
    expect(avgSpecAcceptLength({})).toBeUndefined();
  });
});
