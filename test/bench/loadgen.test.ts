import type * as http from 'node:http';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { endpointFor, runLevel } from '../../src/bench/loadgen.js';
import { useFakeServers } from '../support/fake-server.js';

// A tiny SGLang-format streaming server: cumulative text, meta_info with
// completion_tokens, multi-token chunks, [DONE]. Behaviour per request is chosen by
// markers in the prompt so one server can mix success and failure.

interface Behaviour {
  firstDelayMs: number;
  chunkDelayMs: number;
  tokensPerChunk: number;
}

interface Fake {
  url: string;
  bodies: Record<string, unknown>[];
  maxConcurrent: number;
  current: number;
  completed: number;
  openSockets: number;
  /** Arrival order of prompts, and whether a SLOW request was in flight at arrival. */
  arrivals: { prompt: string; slowActive: boolean }[];
}

const servers = useFakeServers({ each: true });

/** Sleep at least `ms` by performance.now (timers may fire a little early). */
async function sleepAtLeast(ms: number): Promise<void> {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    await new Promise((r) => setTimeout(r, Math.max(1, Math.ceil(until - performance.now()))));
  }
}

async function waitFor(cond: () => boolean, what: string, deadlineMs = 5000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function startFake(b: Behaviour, slowReleaseAfter = 0): Promise<Fake> {
  let slowActive = false;
  const fake: Fake = {
    url: '',
    bodies: [],
    maxConcurrent: 0,
    current: 0,
    completed: 0,
    openSockets: 0,
    arrivals: [],
  };
  const { server, baseUrl } = await servers.start((raw, res, req) => handle(req, res, raw));
  fake.url = baseUrl;
  server.on('connection', (sock) => {
    fake.openSockets++;
    sock.on('close', () => fake.openSockets--);
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, raw: string): Promise<void> {
    const body = JSON.parse(raw) as Record<string, unknown>;
    fake.bodies.push(body);
    const chat = req.url === '/v1/chat/completions';
    const prompt = chat ? (body.messages as { content: string }[])[0].content : (body.text as string);
    const maxTokens = chat
      ? (body.max_tokens as number)
      : (body.sampling_params as { max_new_tokens: number }).max_new_tokens;
    fake.arrivals.push({ prompt, slowActive });
    fake.current++;
    fake.maxConcurrent = Math.max(fake.maxConcurrent, fake.current);
    res.on('close', () => {
      fake.current--;
      fake.completed++;
    });
    const arrived = performance.now();

    if (prompt.includes('FAIL500')) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'internal boom' } }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (o: unknown): boolean => res.write(`data: ${JSON.stringify(o)}\n\n`);
    if (prompt.includes('SLOW')) {
      slowActive = true;
      const deadline = Date.now() + 5000;
      while (fake.completed < slowReleaseAfter && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    }
    await sleepAtLeast(b.firstDelayMs);
    let n = 0;
    let text = '';
    while (n < maxTokens) {
      const add = n === 0 ? 1 : Math.min(b.tokensPerChunk, maxTokens - n);
      n += add;
      text += ' tok'.repeat(add);
      const last = n === maxTokens;
      if (chat) {
        send({
          choices: [{ index: 0, delta: { content: ' tok'.repeat(add) }, finish_reason: last ? 'length' : null }],
        });
      } else {
        send({
          text,
          meta_info: {
            id: 'r',
            prompt_tokens: prompt.split(' ').length,
            completion_tokens: n,
            finish_reason: last ? { type: 'length', length: n } : null,
            ...(last ? { e2e_latency: (performance.now() - arrived) / 1000, spec_verify_ct: Math.ceil(n / 2) } : {}),
          },
        });
      }
      if (prompt.includes('STREAMERR')) {
        send({ error: { message: 'decode crashed' } });
        res.end();
        return;
      }
      if (prompt.includes('RESET')) {
        res.socket?.destroy();
        return;
      }
      if (!last) await sleepAtLeast(b.chunkDelayMs);
    }
    if (chat) send({ choices: [], usage: { prompt_tokens: prompt.split(' ').length, completion_tokens: n } });
    if (prompt.includes('SLOW')) slowActive = false;
    res.end('data: [DONE]\n\n');
  }

  return fake;
}

const prompts = (n: number, tag = 'p') => Array.from({ length: n }, (_, i) => `${tag}${i} hello world`);

describe('runLevel', () => {
  it('keeps exactly `concurrency` requests in flight', async () => {
    const fake = await startFake({ firstDelayMs: 40, chunkDelayMs: 5, tokensPerChunk: 2 });
    const run = await runLevel({
      baseUrl: fake.url,
      api: 'generate',
      prompts: prompts(24),
      concurrency: 6,
      outputLen: 8,
      warmup: 0,
    });
    expect(fake.maxConcurrent).toBe(6);
    expect(run.maxInFlight).toBe(6);
    expect(run.concurrency).toBe(6);
    expect(run.results).toHaveLength(24);
    expect(run.results.every((r) => r.error === undefined && r.outputTokens === 8)).toBe(true);
    expect(run.results.map((r) => r.index)).toEqual([...Array(24).keys()]);
  });

  it('has no batch barrier: other slots keep cycling while one request is slow', async () => {
    // SLOW is held until 10 other requests completed; with batch barriers it could not finish.
    const fake = await startFake({ firstDelayMs: 1, chunkDelayMs: 1, tokensPerChunk: 4 }, 10);
    const list = ['SLOW request', ...prompts(10)];
    const run = await runLevel({
      baseUrl: fake.url,
      api: 'generate',
      prompts: list,
      concurrency: 2,
      outputLen: 4,
      warmup: 0,
    });
    expect(run.results.every((r) => r.error === undefined)).toBe(true);
    // (p0 may race SLOW to the server; every later request must arrive while SLOW runs)
    expect(fake.arrivals.filter((a) => a.slowActive).length).toBeGreaterThanOrEqual(9);
    expect(run.results[0].e2eMs).toBeGreaterThan(Math.max(...run.results.slice(1).map((r) => r.e2eMs)));
  });

  it('sends uncounted warmup requests first, capped at 32 tokens, with the first prompt', async () => {
    const fake = await startFake({ firstDelayMs: 1, chunkDelayMs: 1, tokensPerChunk: 16 });
    const list = prompts(5);
    const run = await runLevel({
      baseUrl: fake.url,
      api: 'generate',
      prompts: list,
      concurrency: 2,
      outputLen: 64,
      warmup: 3,
    });
    expect(fake.bodies).toHaveLength(8);
    for (const b of fake.bodies.slice(0, 3)) {
      expect(b).toEqual({
        text: list[0],
        sampling_params: { max_new_tokens: 32, temperature: 0, ignore_eos: true },
        stream: true,
      });
    }
    expect(
      fake.bodies
        .slice(3)
        .map((b) => b.text)
        .sort(),
    ).toEqual([...list].sort());
    expect(run.results).toHaveLength(5);
    expect(run.results.every((r) => r.outputTokens === 64)).toBe(true);
    expect(run.warmup).toHaveLength(3);
    expect(run.warmup.every((r) => r.outputTokens === 32)).toBe(true);
  });

  it('measures TTFT and multi-token ITLs plausibly', async () => {
    const fake = await startFake({ firstDelayMs: 50, chunkDelayMs: 20, tokensPerChunk: 3 });
    const run = await runLevel({
      baseUrl: fake.url,
      api: 'generate',
      prompts: prompts(2),
      concurrency: 1,
      outputLen: 10,
      warmup: 0,
    });
    for (const r of run.results) {
      expect(r.error).toBeUndefined();
      expect(r.ttftMs).toBeGreaterThanOrEqual(50);
      // first chunk 1 token, then three chunks of 3 → 9 ITL entries in equal triplets
      expect(r.itlsMs).toHaveLength(9);
      for (let k = 0; k < 9; k += 3) {
        expect(r.itlsMs[k + 1]).toBe(r.itlsMs[k]);
        expect(r.itlsMs[k + 2]).toBe(r.itlsMs[k]);
      }
      const lastTokenAt = r.ttftMs + r.itlsMs.reduce((a, b) => a + b, 0);
      expect(lastTokenAt).toBeGreaterThanOrEqual(50 + 3 * 20);
      expect(r.e2eMs).toBeGreaterThanOrEqual(lastTokenAt);
      expect(r.outputTokens).toBe(10);
      expect(r.promptTokens).toBe(3);
      expect(r.acceptLength).toBe(2); // 10 / spec_verify_ct 5
      expect(r.serverE2eMs).toBeGreaterThanOrEqual(110);
    }
    expect(run.durationMs).toBeGreaterThanOrEqual(run.results[0].e2eMs + run.results[1].e2eMs);
  });

  it('records HTTP 500, stream error frames and dropped connections as errors instead of throwing', async () => {
    const fake = await startFake({ firstDelayMs: 1, chunkDelayMs: 1, tokensPerChunk: 2 });
    const list = ['ok one', 'FAIL500 please', 'STREAMERR please', 'RESET please', 'ok two'];
    const run = await runLevel({
      baseUrl: fake.url,
      api: 'generate',
      prompts: list,
      concurrency: 2,
      outputLen: 6,
      warmup: 0,
    });
    const [ok1, http500, streamErr, reset, ok2] = run.results;
    expect(ok1.error).toBeUndefined();
    expect(ok2.error).toBeUndefined();
    expect(http500.error).toBe('HTTP 500 Internal Server Error: internal boom');
    expect(streamErr.error).toBe('stream error: decode crashed');
    expect(reset.error).toMatch(/closed before \[DONE\]|response error|request error/);
  });

  it('streams /v1/chat/completions with include_usage and counts usage tokens', async () => {
    const fake = await startFake({ firstDelayMs: 5, chunkDelayMs: 2, tokensPerChunk: 1 });
    const run = await runLevel({
      baseUrl: fake.url,
      api: 'chat',
      prompts: prompts(3),
      concurrency: 3,
      outputLen: 5,
      warmup: 1,
      model: 'm',
    });
    expect(fake.bodies[0]).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'p0 hello world' }],
      max_tokens: 5,
      temperature: 0,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
    expect(fake.bodies.slice(1).map((b) => b.max_tokens)).toEqual([5, 5, 5]);
    for (const r of run.results) {
      expect(r.error).toBeUndefined();
      expect(r.outputTokens).toBe(5);
      expect(r.promptTokens).toBe(3);
      expect(r.itlsMs).toHaveLength(4);
    }
  });

  it('reports progress after each measured request', async () => {
    const fake = await startFake({ firstDelayMs: 1, chunkDelayMs: 1, tokensPerChunk: 4 });
    const seen: [number, number][] = [];
    await runLevel({
      baseUrl: fake.url,
      api: 'generate',
      prompts: prompts(4),
      concurrency: 2,
      outputLen: 4,
      warmup: 1,
      onProgress: (d, t) => seen.push([d, t]),
    });
    expect(seen).toEqual([
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
  });

  it('rejects on abort, stops sending and closes its connections', async () => {
    const fake = await startFake({ firstDelayMs: 30, chunkDelayMs: 10, tokensPerChunk: 1 });
    const ac = new AbortController();
    const p = runLevel({
      baseUrl: fake.url,
      api: 'generate',
      prompts: prompts(50),
      concurrency: 2,
      outputLen: 5,
      warmup: 0,
      signal: ac.signal,
      onProgress: (d) => d === 2 && ac.abort(new Error('stop now')),
    });
    await expect(p).rejects.toThrow('stop now');
    await waitFor(() => fake.openSockets === 0, 'client sockets to close');
    // 2 finished when it aborted; at most `concurrency` more had been sent by then.
    expect(fake.bodies.length).toBeLessThanOrEqual(2 + 2);
  });

  it('adds one abort listener per level, so 40 concurrent requests raise no leak warning', async () => {
    const fake = await startFake({ firstDelayMs: 20, chunkDelayMs: 1, tokensPerChunk: 4 });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const run = await runLevel({
        baseUrl: fake.url,
        api: 'generate',
        prompts: prompts(40),
        concurrency: 40,
        outputLen: 4,
        warmup: 0,
        signal: new AbortController().signal,
      });
      expect(run.maxInFlight).toBe(40);
      await new Promise((r) => setImmediate(r));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('builds endpoint paths under a base URL prefix', () => {
    expect(endpointFor('http://127.0.0.1:30000', 'generate').path).toBe('/generate');
    expect(endpointFor('http://h:1/proxy/', 'chat').path).toBe('/proxy/v1/chat/completions');
    expect(endpointFor('http://[::1]:8080', 'generate')).toMatchObject({ hostname: '::1', port: 8080 });
  });

  it('returns an empty run for no prompts and validates its arguments', async () => {
    const fake = await startFake({ firstDelayMs: 1, chunkDelayMs: 1, tokensPerChunk: 1 });
    const run = await runLevel({
      baseUrl: fake.url,
      api: 'generate',
      prompts: [],
      concurrency: 4,
      outputLen: 4,
      warmup: 1,
    });
    expect(run.results).toEqual([]);
    expect(fake.bodies).toHaveLength(0);
    await expect(
      runLevel({ baseUrl: fake.url, api: 'generate', prompts: ['x'], concurrency: 0, outputLen: 4, warmup: 0 }),
    ).rejects.toThrow(RangeError);
  });
});
