/**
 * `aerie-sim vllm` serving: its launch line parsed as vLLM 0.32.0's parser does, its log read
 * by aerie's own vLLM reader (src/engines/vllm/log.ts) to the same phases as the real logs in
 * test/fixtures/real/vllm-0.32.0/, its API in the real shapes, and its spec-decode counters
 * read by aerie's parser (src/engines/vllm/metrics.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { counterDelta, readVllmPhase, specCounters, VllmClient, windowAcceptLength } from '../../src/engines/index.js';
import { MODEL, VllmSim, makeVllmDrafter, runToExit, spec } from '../support/sim-vllm.js';
import { runSimCli } from '../support/sim.js';

const FX = join(import.meta.dirname, '../fixtures/real/vllm-0.32.0');

describe('aerie-sim vllm: the launch line', () => {
  it('refuses an unknown flag with argparse usage and exit 2; takes a positional model and ignores it', () => {
    const bad = runSimCli(['vllm', '--model', MODEL, '--bogus', '1'], {}, { timeoutMs: 30_000 });
    expect(bad.status).toBe(2);
    // The real parser takes "1" as the positional model_tag and names only the flag (vllm==0.32.0, run on this machine).
    expect(bad.stderr).toMatch(/^usage: api_server\.py \[-h\] \[--headless\]/m);
    expect(bad.stderr.trimEnd().split('\n').at(-1)).toBe('api_server.py: error: unrecognized arguments: --bogus');
    const typed = runSimCli(['vllm', '--model', MODEL, '-tp', 'abc'], {}, { timeoutMs: 30_000 });
    expect(typed.status).toBe(2);
    expect(typed.stderr).toContain(
      "api_server.py: error: argument --tensor-parallel-size/-tp: invalid int value: 'abc'",
    );
    const two = runSimCli(['vllm', 'a', 'b', '--model', MODEL], {}, { timeoutMs: 30_000 });
    expect(two.stderr).toContain('api_server.py: error: unrecognized arguments: b');
  });
});

describe('aerie-sim vllm: a plain server', () => {
  let sim: VllmSim;
  beforeAll(async () => {
    sim = await VllmSim.start([
      'ignored-model-tag',
      '--model',
      MODEL,
      '--max-model-len',
      '4K', // binary K (vllm==0.32.0:vllm/utils/argparse_utils.py:33-73): 4096
      '--dtype',
      'bfloat16',
      '--seed',
      '0',
      '--served-model-name',
      'tgt',
      'tgt-alias',
      '--max_num_seqs',
      '64',
    ]);
    // The port refuses connections until the engine is up (serve.log; facts (a)2).
    expect(await sim.status('/health')).toBeNull();
    await sim.ready();
  }, 60_000);
  afterAll(async () => {
    await sim?.stop();
  });

  it('logs startup as vLLM does, read to "ready" by aerie, in the order of the real serve.log', () => {
    const real = readFileSync(join(FX, 'serve.log'), 'utf8');
    expect(readVllmPhase(sim.out)).toEqual(readVllmPhase(real));
    const partial = sim.out.split('Loading weights took')[0]!;
    expect(readVllmPhase(partial).phase).toBe(readVllmPhase(real.split('Loading weights took')[0]!).phase);
    const order = [
      'version 0.32.0',
      "non-default args: {'host': '127.0.0.1', 'port': ",
      'Resolved architecture: LlamaForCausalLM',
      'Initializing a V1 LLM engine (v0.32.0) with config:',
      'Starting to load model',
      'Loading weights took',
      'KV cache size:',
      'init engine (profile, create kv cache, warmup model) took',
      'Starting vLLM server on http://127.0.0.1:',
      'INFO:     Started server process [',
      'INFO:     Waiting for application startup.',
      'INFO:     Application startup complete.',
    ];
    const at = order.map((s) => sim.out.indexOf(s));
    expect(
      at.every((i) => i >= 0),
      sim.out,
    ).toBe(true);
    expect([...at].sort((x, y) => x - y)).toEqual(at);
    for (const s of order) expect(real).toContain(s);
    expect(sim.out).toMatch(
      /^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[api_utils\.py:286\] non-default args:/m,
    );
    expect(sim.out).toContain("'max_model_len': 4096");
    expect(sim.out).toContain("'served_model_name': ['tgt', 'tgt-alias']");
  });

  it('answers /version, /v1/models, /tokenize and completions in vLLM 0.32.0 shapes', async () => {
    // The real answer is {"version"} alone; the simulator marks itself beside it (never passed off as real).
    expect((await sim.json('/version')).body).toEqual({
      version: '0.32.0',
      aerie_sim: { name: 'aerie-sim vllm', release: '0.32.0' },
    });
    const models = (await sim.json('/v1/models')).body;
    expect(models.data.map((m: any) => [m.id, m.root, m.max_model_len, m.owned_by])).toEqual([
      ['tgt', MODEL, 4096, 'vllm'],
      ['tgt-alias', MODEL, 4096, 'vllm'],
    ]);
    const tok = await sim.json('/tokenize', { model: 'tgt', prompt: 'hello there' });
    expect(tok.body).toMatchObject({ count: tok.body.tokens.length, max_model_len: 4096 });
    const cmpl = await sim.json('/v1/completions', {
      model: 'tgt',
      prompt: 'The quick brown fox',
      max_tokens: 8,
      temperature: 0,
    });
    expect(cmpl.status).toBe(200);
    expect(Object.keys(cmpl.body)).toEqual(Object.keys(JSON.parse(readFileSync(join(FX, 'completion.json'), 'utf8'))));
    expect(cmpl.body.system_fingerprint).toMatch(/^vllm-0\.32\.0-[0-9a-f]{8}$/);
    expect(cmpl.body.usage).toMatchObject({ completion_tokens: 8, total_tokens: cmpl.body.usage.prompt_tokens + 8 });
    const chat = await sim.json('/v1/chat/completions', {
      model: 'tgt-alias',
      messages: [{ role: 'user', content: 'Say hello.' }],
      max_tokens: 16,
    });
    expect(Object.keys(chat.body)).toEqual(
      Object.keys(JSON.parse(readFileSync(join(FX, 'chat-completion.json'), 'utf8'))),
    );
    const other = await sim.json('/v1/completions', { model: 'not-served', prompt: 'x' });
    expect(other.status).toBe(404);
    expect(other.body.error).toMatchObject({
      type: 'NotFoundError',
      message: 'The model `not-served` does not exist.',
    });
  });

  it("streams chat as aerie's load generator asks (continuous usage, final usage chunk, [DONE])", async () => {
    const res = await fetch(`${sim.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'tgt',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 12,
        temperature: 0,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    });
    const events = (await res.text())
      .split('\n\n')
      .filter((b) => b.startsWith('data: '))
      .map((b) => b.slice(6));
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const last = chunks.at(-1);
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({
      prompt_tokens: last.usage.prompt_tokens,
      total_tokens: last.usage.prompt_tokens + 12,
      completion_tokens: 12,
    });
    expect(chunks.at(-2).choices[0].finish_reason).toBe('length');
    expect(chunks.slice(1, -1).map((c) => c.usage.completion_tokens)).toEqual([...Array(12).keys()].map((i) => i + 1));
  });

  it('exports no spec-decode counters without a speculative config', async () => {
    const metrics = await fetch(`${sim.base}/metrics`).then((r) => r.text());
    expect(metrics).toContain('vllm:num_requests_running{engine="0",model_name="tgt"}');
    expect(specCounters(metrics)).toBeUndefined();
  });
});

describe('aerie-sim vllm: EAGLE-3 speculation and its counters', () => {
  let sim: VllmSim;
  beforeAll(async () => {
    const draft = await makeVllmDrafter(
      (c) => (c.aerie_sim = { accept_length: 2.6 }),
      ['midlayer.self_attn.q_proj.weight', 'fc.weight', 'lm_head.weight', 'd2t', 't2d'],
    );
    sim = await VllmSim.start(['--model', MODEL, '--enforce-eager', ...spec(draft, 'eagle3', 3)]);
    await sim.ready();
  }, 60_000);
  afterAll(async () => {
    await sim?.stop();
  });

  it('logs the drafter as eagle3.log does, and is read to ready', () => {
    for (const s of [
      'Resolved architecture: LlamaForCausalLMEagle3',
      'Overriding draft model max model len from 2048 to 8192',
      "speculative_config=SpeculativeConfig(method='eagle3'",
      'Loading drafter model...',
      'Detected EAGLE model without its own embed_tokens in the checkpoint.',
      'Enforce eager set, disabling torch.compile',
    ])
      expect(sim.out, s).toContain(s);
    expect(sim.out).not.toContain('Graph capturing finished');
    expect(readVllmPhase(sim.out).phase).toBe('ready');
  });

  it('names and labels the counters as the real /metrics does, and counts drafts, draft tokens and accepted tokens', async () => {
    const client = new VllmClient(sim.base);
    const read = () => fetch(`${sim.base}/metrics`).then((r) => r.text());
    const names = (t: string) =>
      t
        .split('\n')
        .filter((l) => l.startsWith('vllm:spec_decode'))
        .map((l) => l.replace(/ \S+$/, '').replace(/model_name="[^"]*"/, 'model_name="M"'))
        .sort();
    const real = readFileSync(join(FX, 'metrics-after.txt'), 'utf8').replace(/\/tmp\/vwork\/models\/target8/g, 'M');
    const m0 = await read();
    expect(names(m0)).toEqual(names(real));
    for (const k of ['drafts', 'draft_tokens', 'accepted_tokens'])
      expect(m0).toContain(`# TYPE vllm:spec_decode_num_${k}_created gauge`);
    const before = (await client.specCounters())!;
    expect(before).toEqual({ drafts: 0, draftTokens: 0, accepted: 0, perPosition: [0, 0, 0] });
    // Health and metrics reads never move the counters (eagle3.result.json idle_check).
    for (let i = 0; i < 3; i++) await sim.status('/health');
    expect(names(await read())).toEqual(names(m0));
    expect(await client.specCounters()).toEqual(before);
    for (const prompt of ['The quick brown fox', 'A second prompt'])
      await client.complete({ model: MODEL, prompt, maxTokens: 64, ignoreEos: true });
    const after = (await client.specCounters())!;
    const d = counterDelta(before, after);
    expect(d.drafts).toBeGreaterThan(0);
    expect(d.draftTokens).toBe(3 * d.drafts);
    expect(d.perPosition.reduce((s, x) => s + x, 0)).toBe(d.accepted);
    expect(d.perPosition[0]).toBeGreaterThanOrEqual(d.perPosition[2]!);
    // 2 × 64 tokens = 2 prefill tokens + one token per draft plus every accepted one.
    expect(2 + d.drafts + d.accepted).toBe(128);
    const len = windowAcceptLength(d)!;
    expect(len).toBeGreaterThan(1.8);
    expect(len).toBeLessThan(3.4);
    await sim.status('/health');
    expect(await client.specCounters()).toEqual(after);
  });
});

describe('aerie-sim vllm: the port', () => {
  it('fails at bind, before any engine, when the port is taken (exit 1)', async () => {
    const holder = await VllmSim.start(['--model', MODEL]);
    try {
      await holder.ready();
      const clash = await runToExit(['--model', MODEL, '--port', String(holder.port)]);
      expect(clash.exitCode).toBe(1);
      expect(clash.out).toContain('OSError: [Errno 98] Address already in use');
      expect(clash.out).not.toContain('Initializing a V1 LLM engine');
    } finally {
      await holder.stop();
    }
  }, 60_000);
});
