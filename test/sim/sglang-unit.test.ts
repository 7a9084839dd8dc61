import { describe, expect, it } from 'vitest';
import { ArgparseError, parseLaunchArgs, serverArgsRepr } from '../../sim/sglang/args.js';
import { H100_8B, chainAcceptProbability, drawAcceptLength, steadyThroughput } from '../../sim/sglang/latency.js';
import { type ModelConfig, acceptPlan } from '../../sim/sglang/model.js';
import { SamplingError, parseSamplingParams } from '../../sim/sglang/sampling.js';
import { readSimEnv, resolveServerArgs } from '../../sim/sglang/settings.js';
import { SimLM } from '../../sim/sglang/lm.js';
import { makeRng, naturalLength, renderChat } from '../../sim/sglang/text.js';
import { SimTokenizer } from '../../sim/sglang/tokenizer.js';

const target: ModelConfig = {
  path: '/m',
  architectures: ['LlamaForCausalLM'],
  modelType: 'llama',
  hiddenSize: 4096,
  numLayers: 32,
  vocabSize: 128256,
  numHeads: 32,
  numKvHeads: 8,
  intermediateSize: 14336,
  maxPositionEmbeddings: 8192,
  eosTokenId: 128009,
  sim: {},
};
const eagle3Drafter: ModelConfig = {
  ...target,
  architectures: ['LlamaForCausalLMEagle3'],
  numLayers: 1,
  sim: { accept_length: 3.2 },
};
const env = readSimEnv({});

describe('launch flags (argparse)', () => {
  it('parses aliases, --flag=value and defaults the way launch_server does', () => {
    const p = parseLaunchArgs(['--model', '/m', '--tp', '8', '--speculative-draft-model=/d', '--disable-cuda-graph']);
    expect(p.args.model_path).toBe('/m');
    expect(p.args.tp_size).toBe(8);
    expect(p.args.speculative_draft_model_path).toBe('/d');
    expect(p.args.disable_cuda_graph).toBe(true);
    expect(p.args.port).toBe(30000);
    expect(p.args.host).toBe('127.0.0.1');
    expect(p.args.decode_log_interval).toBe(40);
  });

  it('rejects unknown flags, bad ints and bad choices with argparse wording', () => {
    expect(() => parseLaunchArgs(['--model-path', '/m', '--bogus', 'x'])).toThrow('unrecognized arguments: --bogus x');
    expect(() => parseLaunchArgs(['--model-path', '/m', '--port', 'abc'])).toThrow(
      "argument --port: invalid int value: 'abc'",
    );
    // 0.5.4 and 0.5.9 give --speculative-algorithm choices; 0.5.12 on check the name after parsing.
    expect(() => parseLaunchArgs(['--model-path', '/m', '--speculative-algorithm', 'MEDUSA'], '0.5.4')).toThrow(
      /invalid choice: 'MEDUSA'/,
    );
    expect(() => parseLaunchArgs(['--port', '1'])).toThrow(ArgparseError);
  });

  it('dumps server_args as a Python repr', () => {
    const repr = serverArgsRepr(parseLaunchArgs(['--model-path', '/m']).args);
    expect(repr).toMatch(/^ServerArgs\(model_path='\/m', tokenizer_path=None, /);
    expect(repr).toContain('trust_remote_code=False');
    expect(repr).toContain('speculative_accept_threshold_single=1.0');
  });
});

describe('ServerArgs post-init', () => {
  it('caps speculative servers at 48 running requests with the real warning, unless set', () => {
    const r = resolveServerArgs(
      parseLaunchArgs(['--model-path', '/m', '--speculative-algorithm', 'EAGLE3']),
      target,
      env,
    );
    expect(r.maxRunning).toBe(48);
    expect(r.warnings).toContain(
      'Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.',
    );
    expect(r.spec).toEqual({ numSteps: 5, topk: 4, numDraftTokens: 8 });
    const set = resolveServerArgs(
      parseLaunchArgs(['--model-path', '/m', '--speculative-algorithm', 'EAGLE3', '--max-running-requests', '256']),
      target,
      env,
    );
    expect(set.maxRunning).toBe(256);
    expect(set.warnings.join('\n')).not.toContain('reset to 48');
  });

  it('rewrites NEXTN to EAGLE and forces num-draft-tokens = steps + 1 at topk 1', () => {
    const r = resolveServerArgs(
      parseLaunchArgs([
        '--model-path',
        '/m',
        '--speculative-algorithm',
        'NEXTN',
        '--speculative-num-steps',
        '3',
        '--speculative-eagle-topk',
        '1',
        '--speculative-num-draft-tokens',
        '8',
      ]),
      target,
      env,
    );
    expect(r.algorithm).toBe('EAGLE');
    expect(r.args.speculative_num_draft_tokens).toBe(4);
    expect(r.warnings).toContain(
      'speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1',
    );
  });
});

describe('drafter acceptance (incident 3)', () => {
  it('EAGLE3 with an EAGLE-3 drafter accepts at the drafter quality, capped at steps + 1', () => {
    expect(acceptPlan('EAGLE3', eagle3Drafter, 5, 8)).toMatchObject({ mean: 3.2, cap: 6 });
    expect(acceptPlan('EAGLE3', { ...eagle3Drafter, sim: { accept_length: 9 } }, 3, 4)).toMatchObject({
      mean: 4,
      cap: 4,
    });
    expect(acceptPlan('EAGLE3', { ...eagle3Drafter, sim: {} }, 5, 8).mean).toBe(2.0);
  });

  it('EAGLE with the same drafter accepts exactly nothing', () => {
    expect(acceptPlan('EAGLE', eagle3Drafter, 5, 8).mean).toBe(1);
  });

  it('the chain draw has the requested mean', () => {
    const q = chainAcceptProbability(3, 6);
    const rand = makeRng(7);
    let sum = 0;
    for (let i = 0; i < 20000; i++) sum += drawAcceptLength(q, 6, rand);
    expect(sum / 20000).toBeCloseTo(3, 1);
    expect(drawAcceptLength(chainAcceptProbability(1, 6), 6, rand)).toBe(1);
  });
});

describe('latency model', () => {
  it('is ~6.3 ms per step at batch 1 (158 tok/s, the EAGLE-3 paper), a roofline above it', () => {
    expect(1000 / steadyThroughput(1, null, 1)).toBeCloseTo(6.32, 2);
    expect(H100_8B.eagerFactor).toBeGreaterThan(1);
  });

  it('gives EAGLE-3 3/1/4 (accept 2.9) 2-2.5x at concurrency 1, falling below 1x at 250', () => {
    const spec = { numSteps: 3, topk: 1, numDraftTokens: 4 };
    const speedup = (b: number) => steadyThroughput(b, spec, 2.9) / steadyThroughput(b, null, 1);
    expect(speedup(1)).toBeGreaterThanOrEqual(2);
    expect(speedup(1)).toBeLessThanOrEqual(2.5);
    expect(speedup(250)).toBeLessThan(1);
    expect(speedup(64)).toBeLessThan(speedup(10));
    // A bypassed drafter costs the draft and verify work and buys nothing.
    expect(steadyThroughput(1, spec, 1)).toBeLessThan(steadyThroughput(1, null, 1));
  });
});

describe('sampling params', () => {
  it('has SGLang defaults', () => {
    expect(parseSamplingParams(undefined)).toMatchObject({
      max_new_tokens: 128,
      temperature: 1,
      top_p: 1,
      top_k: -1,
      min_p: 0,
      ignore_eos: false,
      min_new_tokens: 0,
    });
    expect(parseSamplingParams({ max_new_tokens: 0 }).max_new_tokens).toBe(0);
  });

  it('rejects what SamplingParams rejects, in its words', () => {
    expect(() => parseSamplingParams({ top_p: 0 })).toThrow('top_p must be in (0, 1], got 0.');
    expect(() => parseSamplingParams({ temperature: -1 })).toThrow('temperature must be non-negative, got -1.');
    expect(() => parseSamplingParams({ max_new_tokens: -1 })).toThrow('max_new_tokens must be at least 0, got -1.');
    expect(() => parseSamplingParams({ max_tokens: 5 })).toThrow(SamplingError);
  });
});

describe('deterministic text and sizes', () => {
  it("renders chat with the target's Llama 3 template, so its ids end with the header's \\n\\n", () => {
    const tok = SimTokenizer.forModel('/nonexistent');
    const text = renderChat([
      { role: 'system', content: ' be brief ' },
      { role: 'user', content: 'hi there you' },
    ]);
    expect(text).toBe(
      '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nbe brief<|eot_id|>' +
        '<|start_header_id|>user<|end_header_id|>\n\nhi there you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    );
    const ids = tok.encode(text);
    expect(ids[0]).toBe(tok.bos);
    expect(ids.slice(-2)).toEqual(new SimLM(tok).chatTail());
  });

  it('derives words and natural length from the prompt only', () => {
    const lm = new SimLM(SimTokenizer.forModel('/nonexistent'));
    const a = lm.stream([0], 0.7, 'p', true);
    const b = lm.stream([0], 0.7, 'p', true);
    expect([a(), a(), a()]).toEqual([b(), b(), b()]);
    expect(naturalLength('x')).toBe(naturalLength('x'));
    expect(naturalLength('x')).toBeGreaterThanOrEqual(24);
  });
});

describe('model step scales', () => {
  it('prefill follows the decode scale unless AERIE_SIM_PREFILL_SCALE sets its own; bad values are refused', () => {
    expect(readSimEnv({}).prefillScale).toBe(1);
    expect(readSimEnv({ AERIE_SIM_DECODE_SCALE: '0.5' })).toMatchObject({ decodeScale: 0.5, prefillScale: 0.5 });
    expect(readSimEnv({ AERIE_SIM_DECODE_SCALE: '0', AERIE_SIM_PREFILL_SCALE: '30' })).toMatchObject({
      decodeScale: 0,
      prefillScale: 30,
    });
    expect(() => readSimEnv({ AERIE_SIM_PREFILL_SCALE: 'slow' })).toThrow(
      /AERIE_SIM_PREFILL_SCALE must be a number >= 0, got 'slow'/,
    );
  });
});
