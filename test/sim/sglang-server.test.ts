import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { naturalLength, renderChat, seedKey } from '../../sim/sglang/text.js';
import { SimTokenizer } from '../../sim/sglang/tokenizer.js';
import { MODEL, Sim, tempDir, until } from '../support/sim-sglang.js';
import { removeWorkdir } from '../support/workdir.js';

/** Prompt tokens as the server counts them: the target tokenizer's ids of the text, BOS first (bench_serving counts the same). */
const tok = SimTokenizer.forModel(MODEL);
const textTokens = (text: string) => tok.encode(text, true).length;

describe('simulated SGLang server: readiness, native and OpenAI APIs', () => {
  let sim: Sim;
  let dumpDir: string;

  beforeAll(async () => {
    dumpDir = await tempDir('aerie-sim-hs-');
    sim = await Sim.start(['--model-path', MODEL, '--decode-log-interval', '5'], {
      AERIE_SIM_TIME_SCALE: '0.02',
      AERIE_SIM_DECODE_SCALE: '0.05',
      // No SGLang release reads it (conformance.md S1): set, it must change nothing.
      SGLANG_HS_DUMP_DIR: dumpDir,
    });
  });

  afterAll(async () => {
    await sim?.stop();
    await removeWorkdir(dumpDir);
  });

  it('answers 503 while loading (model info already 200), then 200, with the startup lines in order', async () => {
    const first = await until('the first HTTP answer', 15_000, async () => (await sim.status('/health')) ?? undefined);
    expect(first).toBe(503);
    expect(await sim.status('/get_model_info')).toBe(200);
    expect(await sim.status('/v1/models')).toBe(200);
    await sim.ready();
    const lines = [
      'server_args=ServerArgs(',
      'Load weight begin. avail mem=',
      'Load weight end. elapsed=',
      's, type=LlamaForCausalLM, avail mem=',
      'Memory pool end',
      // 0.5.23's wording (the default release; sim/sglang/startup.ts).
      'Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=',
      'Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16,',
      'max_total_num_tokens=',
      'Uvicorn running on http://127.0.0.1:',
      'The server is fired up and ready to roll!',
    ];
    const at = lines.map((l) => sim.stderr.indexOf(l));
    expect(
      at.every((i) => i >= 0),
      `missing lines in:\n${sim.stderr}`,
    ).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    expect(sim.stderr).not.toContain('Max running requests is reset to 48');
    expect(sim.stdout).toMatch(/"GET \/health HTTP\/1.1" 503 Service Unavailable/);
  });

  it('/generate returns text, output_ids and meta_info; output is a function of the prompt', async () => {
    const prompt = 'tell me about the river in the valley';
    const a = await sim.json('/generate', { text: prompt, sampling_params: { max_new_tokens: 2000 } });
    expect(a.status).toBe(200);
    const m = a.body.meta_info;
    expect(Object.keys(m)).toEqual(
      expect.arrayContaining([
        'id',
        'finish_reason',
        'prompt_tokens',
        'completion_tokens',
        'cached_tokens',
        'e2e_latency',
      ]),
    );
    expect(m).not.toHaveProperty('spec_verify_ct');
    expect(m.prompt_tokens).toBe(textTokens(prompt));
    expect(m.completion_tokens).toBe(naturalLength(seedKey(prompt, null)));
    expect(m.finish_reason).toEqual({ type: 'stop', matched: 2 });
    expect(a.body.output_ids.at(-1)).toBe(2);
    const b = await sim.json('/generate', { text: prompt, sampling_params: { max_new_tokens: 2000 } });
    expect(b.body.text).toBe(a.body.text);
    const capped = await sim.json('/generate', {
      text: prompt,
      sampling_params: { max_new_tokens: 7, ignore_eos: true },
    });
    expect(capped.body.meta_info).toMatchObject({ completion_tokens: 7, finish_reason: { type: 'length', length: 7 } });
    const prefillOnly = await sim.json('/generate', { text: prompt, sampling_params: { max_new_tokens: 0 } });
    expect(prefillOnly.body).toMatchObject({
      text: '',
      output_ids: [],
      meta_info: { completion_tokens: 0, finish_reason: { type: 'length', length: 0 } },
    });
  });

  it('/generate rejects bad requests with HTTP 400 {"error": {"message"}}, or an SSE error event when streaming', async () => {
    const bad = await sim.json('/generate', { text: 'x', sampling_params: { top_p: 0 } });
    expect(bad).toEqual({ status: 400, body: { error: { message: 'top_p must be in (0, 1], got 0.' } } });
    const none = await sim.json('/generate', { sampling_params: {} });
    expect(none.status).toBe(400);
    expect(none.body.error.message).toContain('text or input_ids');
    // A body that is not JSON fails FastAPI's validation: SGLang's ErrorResponse, on /generate too.
    const garbled = await fetch(sim.base + '/generate', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"text": ',
    });
    expect(garbled.status).toBe(400);
    expect(await garbled.json()).toMatchObject({ object: 'error', type: 'Bad Request', param: null, code: 400 });
    const streamed = await sim.sse('/generate', { text: 'x', stream: true, sampling_params: { top_k: 0 } });
    expect(streamed).toEqual([{ error: { message: 'top_k must be -1 (disable), or at least 1, got 0.' } }, '[DONE]']);
  });

  it('/generate streams cumulative text over SSE and ends with [DONE]', async () => {
    const chunks = await sim.sse('/generate', {
      text: 'stream this please',
      stream: true,
      sampling_params: { max_new_tokens: 12, ignore_eos: true },
    });
    expect(chunks.at(-1)).toBe('[DONE]');
    const objs = chunks.slice(0, -1) as any[];
    expect(objs.length).toBeGreaterThan(1);
    for (let i = 1; i < objs.length; i++) {
      expect(objs[i].text.startsWith(objs[i - 1].text)).toBe(true);
      expect(objs[i].output_ids.length).toBeGreaterThan(objs[i - 1].output_ids.length);
    }
    expect(objs.slice(0, -1).every((c) => c.meta_info.finish_reason === null)).toBe(true);
    const last = objs.at(-1);
    expect(last.meta_info).toMatchObject({ completion_tokens: 12, finish_reason: { type: 'length', length: 12 } });
    expect(last.meta_info.e2e_latency).toBeGreaterThan(0);
  });

  it('/v1/chat/completions: usage when not streaming; role, deltas, finish, usage, [DONE] when streaming', async () => {
    const messages = [
      { role: 'system', content: 'answer briefly' },
      { role: 'user', content: 'what is a drafter' },
    ];
    const plain = await sim.json('/v1/chat/completions', { model: 'x', messages, max_tokens: 20 });
    expect(plain.status).toBe(200);
    expect(plain.body.object).toBe('chat.completion');
    const promptTokens = tok.encode(renderChat(messages)).length;
    expect(plain.body.usage).toMatchObject({
      prompt_tokens: promptTokens,
      completion_tokens: 20,
      total_tokens: promptTokens + 20,
    });
    expect(plain.body.choices[0]).toMatchObject({ index: 0, finish_reason: 'length', message: { role: 'assistant' } });

    const chunks = (await sim.sse('/v1/chat/completions', {
      messages,
      max_tokens: 20,
      stream: true,
      stream_options: { include_usage: true },
    })) as any[];
    expect(chunks.at(-1)).toBe('[DONE]');
    expect(chunks[0].choices[0].delta).toMatchObject({ role: 'assistant', content: '' });
    const usage = chunks.at(-2);
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ prompt_tokens: promptTokens, completion_tokens: 20 });
    const finish = chunks.at(-3);
    expect(finish.choices[0]).toMatchObject({ finish_reason: 'length', delta: {} });
    const deltas = chunks.slice(1, -3);
    expect(deltas.every((c) => c.object === 'chat.completion.chunk' && c.choices[0].finish_reason === null)).toBe(true);
    expect(deltas.map((c) => c.choices[0].delta.content).join('')).toBe(plain.body.choices[0].message.content);
  });

  it('/v1/completions answers with text_completion choices', async () => {
    const r = await sim.json('/v1/completions', { prompt: 'once upon a time', max_tokens: 5 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      object: 'text_completion',
      usage: { prompt_tokens: textTokens('once upon a time'), completion_tokens: 5 },
    });
    expect(r.body.choices[0].text.split(' ')).toHaveLength(5);
  });

  it('ignores SGLANG_HS_DUMP_DIR, as every SGLang release does: no dump files, any rid accepted', async () => {
    const text = 'one two three four five six seven eight nine ten';
    const r = await sim.json('/generate', { text, rid: 'sample-0001', sampling_params: { max_new_tokens: 0 } });
    expect(r.status).toBe(200);
    const odd = await sim.json('/generate', { text, rid: '../escape', sampling_params: { max_new_tokens: 0 } });
    expect(odd.status).toBe(200);
    expect(await fs.readdir(dumpDir)).toEqual([]);
  });

  it('/flush_cache refuses while a request is in flight, then flushes and resets cached_tokens', async () => {
    const prompt = 'a prompt that will be cached for the flush test';
    await sim.json('/generate', { text: prompt, sampling_params: { max_new_tokens: 1 } });
    const again = await sim.json('/generate', { text: prompt, sampling_params: { max_new_tokens: 1 } });
    expect(again.body.meta_info.cached_tokens).toBe(textTokens(prompt) - 1);

    const abort = new AbortController();
    const res = await fetch(sim.base + '/generate', {
      method: 'POST',
      signal: abort.signal,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        text: 'long one',
        stream: true,
        sampling_params: { max_new_tokens: 8000, ignore_eos: true },
      }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await reader.read();
    const refused = await sim.json('/flush_cache');
    expect(refused.status).toBe(400);
    abort.abort();
    await until('flush accepted', 10_000, async () =>
      (await sim.json('/flush_cache')).status === 200 ? true : undefined,
    );
    const after = await sim.json('/generate', { text: prompt, sampling_params: { max_new_tokens: 1 } });
    expect(after.body.meta_info.cached_tokens).toBe(0);
  });

  it('/server_info carries the launch args under SGLang names, internal_states and version', async () => {
    const r = await sim.json('/server_info');
    expect(r.body).toMatchObject({
      model_path: MODEL,
      port: sim.port,
      tp_size: 1,
      speculative_algorithm: null,
      max_running_requests: null,
      decode_log_interval: 5,
    });
    expect(Array.isArray(r.body.internal_states)).toBe(true);
    expect(r.body.internal_states[0]).not.toHaveProperty('avg_spec_accept_length');
    expect(typeof r.body.version).toBe('string');
    expect((await sim.json('/get_server_info')).body.port).toBe(sim.port);
  });

  it('logs decode batches every --decode-log-interval steps, without accept len', async () => {
    await sim.json('/generate', { text: 'count steps', sampling_params: { max_new_tokens: 30, ignore_eos: true } });
    const decode = sim.stderr.split('\n').filter((l) => l.includes('Decode batch. #running-req: '));
    expect(decode.length).toBeGreaterThan(0);
    expect(decode[0]).toMatch(
      /#token: \d+, token usage: \d\.\d\d, cuda graph: True, gen throughput \(token\/s\): [\d.]+, #queue-req: 0$/,
    );
    expect(sim.stderr).not.toContain('accept len');
  });

  it('shuts down on SIGTERM with exit code 0', async () => {
    expect(await sim.stop()).toBe(0);
    expect(sim.stderr).toContain('Shutting down');
  });
});

describe('simulated SGLang server: batching throughput', () => {
  let sim: Sim;
  beforeAll(async () => {
    sim = await Sim.start(['--model-path', MODEL], { AERIE_SIM_DECODE_SCALE: '1' });
    await sim.ready();
  });
  afterAll(async () => {
    await sim?.stop();
  });

  const gen = (i: number) =>
    sim.json('/generate', {
      text: `throughput prompt number ${i}`,
      sampling_params: { max_new_tokens: 64, ignore_eos: true },
    });

  it('produces far more tokens/s at concurrency 64 than at 1, and ~141 tok/s alone', async () => {
    let t = performance.now();
    for (let i = 0; i < 2; i++) expect((await gen(i)).body.meta_info.completion_tokens).toBe(64);
    const single = (2 * 64) / ((performance.now() - t) / 1000);
    t = performance.now();
    const all = await Promise.all(Array.from({ length: 64 }, (_, i) => gen(100 + i)));
    const batched = all.reduce((s, r) => s + r.body.meta_info.completion_tokens, 0) / ((performance.now() - t) / 1000);
    expect(single).toBeLessThan(160);
    expect(single).toBeGreaterThan(40);
    expect(batched / single).toBeGreaterThan(8);
  });
});
