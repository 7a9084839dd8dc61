/**
 * `aerie-sim vllm` failing as vLLM 0.32.0 fails (test/fixtures/real/vllm-0.32.0/): method
 * eagle refused at config time, a full-vocab drafter with d2t refused by the loader, auxiliary
 * layers that collapse killing the engine on the first decode (exit 0, or /health 503 with
 * VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1), and the simulator's faults. Each log is read by aerie's
 * own reader, which must name the same root cause as it does for the real log.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { classifyVllmFailure, readVllmPhase } from '../../src/engines/index.js';
import { MODEL, VllmSim, makeTarget, makeVllmDrafter, runToExit, spec, until } from '../support/sim-vllm.js';

const FX = join(import.meta.dirname, '../fixtures/real/vllm-0.32.0');
const real = (n: string) => readFileSync(join(FX, n), 'utf8');

describe('aerie-sim vllm: refused before serving', () => {
  it('method eagle with an EAGLE-3 drafter: ValidationError at config time, exit 1, as eagle-method.log', async () => {
    const draft = await makeVllmDrafter();
    const sim = await runToExit(['--model', MODEL, ...spec(draft, 'eagle')]);
    expect(sim.exitCode).toBe(1);
    expect(sim.out).toContain("Model architectures ['EagleLlamaForCausalLMEagle3'] are not supported for now.");
    expect(sim.out).not.toContain('Initializing a V1 LLM engine');
    const got = classifyVllmFailure(sim.out);
    const want = classifyVllmFailure(real('eagle-method.log'));
    expect(got.retryable).toBe(false);
    expect(got.retryable).toBe(want.retryable);
    expect(got.message.split('. Supported')[0]).toBe(want.message.split('. Supported')[0]);
  }, 30_000);

  it('a full-vocab drafter with d2t: the loader raises, the engine fails to start, exit 1, as d2t-full-vocab.log', async () => {
    const draft = await makeVllmDrafter(
      (c) => (c.draft_vocab_size = 32000),
      ['midlayer.mlp.down_proj.weight', 'lm_head.weight', 'd2t', 't2d'],
    );
    const sim = await runToExit(['--model', MODEL, ...spec(draft)]);
    expect(sim.exitCode).toBe(1);
    for (const s of [
      'EngineCore failed to start.',
      'RuntimeError: Engine core initialization failed. See root cause above.',
    ])
      expect(sim.out).toContain(s);
    expect(readVllmPhase(sim.out).phase).toBe(readVllmPhase(real('d2t-full-vocab.log')).phase);
    const got = classifyVllmFailure(sim.out);
    const want = classifyVllmFailure(real('d2t-full-vocab.log'));
    expect(got.retryable, JSON.stringify(got)).toBe(want.retryable);
    expect(got.message.split(' in Eagle3LlamaForCausalLM')[0]).toBe(
      want.message.split(' in Eagle3LlamaForCausalLM')[0],
    );
  }, 30_000);

  it('a drafter with draft_vocab_size below the vocab and d2t loads and serves', async () => {
    const draft = await makeVllmDrafter(undefined, ['fc.weight', 'd2t', 't2d']);
    const sim = await VllmSim.start(['--model', MODEL, ...spec(draft)]);
    try {
      await sim.ready();
    } finally {
      await sim.stop();
    }
  }, 30_000);
});

describe('aerie-sim vllm: auxiliary layers that collapse (aux-collapse*.log)', () => {
  it("says ready, dies on the first decode with vLLM's 500, and exits by itself with code 0", async () => {
    const target = await makeTarget(4);
    const draft = await makeVllmDrafter((c) => delete c.eagle_config);
    const sim = await VllmSim.start(['--model', target, ...spec(draft)]);
    try {
      await sim.ready();
      const r = await sim.json('/v1/completions', { prompt: 'The quick brown fox', max_tokens: 32, temperature: 0 });
      expect(r.status).toBe(500);
      expect(r.body).toEqual(JSON.parse(JSON.parse(real('aux-collapse.result.json')).completions[0][2]));
      expect(await sim.waitExit()).toBe(0);
      expect(await sim.status('/health')).toBeNull();
      const got = classifyVllmFailure(sim.out);
      const want = classifyVllmFailure(real('aux-collapse.log'));
      expect(got.retryable).toBe(want.retryable);
      // 4 layers: the default (2, 2, 1) gives two states of 512 where fc takes three.
      expect(got.message).toMatch(
        /^RuntimeError: mat1 and mat2 shapes cannot be multiplied \(\d+x1024 and 1536x512\)$/,
      );
      expect(want.message).toMatch(/^RuntimeError: mat1 and mat2 shapes cannot be multiplied \(\d+x256 and 384x128\)$/);
      for (const s of [
        'EngineCore encountered a fatal error.',
        'AsyncLLM output_handler failed.',
        'INFO:     Shutting down',
      ])
        expect(sim.out).toContain(s);
    } finally {
      await sim.stop();
    }
  }, 60_000);

  it('with VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1 it stays up, /health 503, requests 500, /metrics 200', async () => {
    const target = await makeTarget(16);
    // Ids of the draft config, two of them equal: a set of two.
    const draft = await makeVllmDrafter((c) => (c.eagle_config.eagle_aux_hidden_state_layer_ids = [1, 7, 7]));
    const sim = await VllmSim.start(['--model', target, ...spec(draft)], { VLLM_KEEP_ALIVE_ON_ENGINE_DEATH: '1' });
    try {
      await sim.ready();
      expect(
        (await sim.json('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 })).status,
      ).toBe(500);
      expect(await sim.status('/health')).toBe(503);
      expect((await sim.json('/v1/completions', { prompt: 'again', max_tokens: 4 })).status).toBe(500);
      expect(await sim.status('/metrics')).toBe(200);
      expect(await sim.status('/health')).toBe(503);
      expect(sim.alive).toBe(true);
      expect(await sim.stop()).toBe(0);
    } finally {
      await sim.stop();
    }
  }, 60_000);
});

describe('aerie-sim vllm: faults (AERIE_SIM_FAULT)', () => {
  it("missing-module: the interpreter's own error, exit 1, before anything else", async () => {
    const sim = await runToExit(['--model', MODEL], { AERIE_SIM_FAULT: 'missing-module' });
    expect(sim.exitCode).toBe(1);
    expect(sim.out.trim()).toBe(
      "/usr/bin/python3: Error while finding module specification for 'vllm.entrypoints.openai.api_server' (ModuleNotFoundError: No module named 'vllm')",
    );
    expect(classifyVllmFailure(sim.out).kind).toBe('missing-module');
  }, 30_000);

  it('exit-during-load: the worker dies loading weights, the engine fails to start, exit 1', async () => {
    const sim = await runToExit(['--model', MODEL], { AERIE_SIM_FAULT: 'exit-during-load' });
    expect(sim.exitCode).toBe(1);
    expect(readVllmPhase(sim.out).phase).toBe('loading weights');
    expect(classifyVllmFailure(sim.out).message).toMatch(/^safetensors_rust\.SafetensorError: /);
  }, 30_000);

  it('never-ready: the engine hangs after its KV cache, the port never listens', async () => {
    const sim = await VllmSim.start(['--model', MODEL], { AERIE_SIM_FAULT: 'never-ready' });
    try {
      await until('the KV cache line', 20_000, () => (sim.out.includes('KV cache size:') ? true : undefined));
      expect(await sim.status('/health')).toBeNull();
      expect(sim.alive).toBe(true);
      expect(readVllmPhase(sim.out).phase).toBe('warming up');
    } finally {
      await sim.stop();
    }
  }, 30_000);

  it('crash-first-decode: ready, then the first decode kills the engine as a run-time death does (500, exit 0)', async () => {
    const sim = await VllmSim.start(['--model', MODEL], { AERIE_SIM_FAULT: 'crash-first-decode' });
    try {
      await sim.ready();
      expect((await sim.json('/v1/completions', { prompt: 'hello', max_tokens: 8 })).status).toBe(500);
      expect(await sim.waitExit()).toBe(0);
      expect(classifyVllmFailure(sim.out)).toMatchObject({ kind: 'crash', retryable: true });
      expect(classifyVllmFailure(sim.out).message).toContain('illegal memory access');
    } finally {
      await sim.stop();
    }
  }, 30_000);
});
