/**
 * The per-release rules of sim/sglang/profile.ts that need a launch flag or variable the release
 * table (sglang-releases.test.ts) does not start its servers with, and the choice of release itself.
 */
import { describe, expect, it } from 'vitest';
import { autoSpecParams, mixedChunkOff, specMeta, specV2, streamDeltas } from '../../sim/sglang/profile.js';
import { SimReleaseError, pickRelease } from '../../sim/sglang/release.js';
import { MODEL } from '../support/sim-sglang.js';
import { parseLaunchArgs } from '../../sim/sglang/args.js';
import { readModelConfig } from '../../sim/sglang/model.js';
import { readSimEnv, resolveServerArgs } from '../../sim/sglang/settings.js';
import { runSimCli } from '../support/sim.js';

describe('choosing the release', () => {
  it('takes --version X.Y.Z right after sglang (stripped), else AERIE_SIM_SGLANG_VERSION, else 0.5.23', () => {
    expect(pickRelease(['--version', '0.5.4', '--port', '1'], {})).toEqual({ release: '0.5.4', rest: ['--port', '1'] });
    expect(pickRelease(['--version=0.5.9'], { AERIE_SIM_SGLANG_VERSION: '0.5.12' })).toEqual({
      release: '0.5.9',
      rest: [],
    });
    expect(pickRelease(['--port', '1'], { AERIE_SIM_SGLANG_VERSION: '0.5.12' })).toEqual({
      release: '0.5.12',
      rest: ['--port', '1'],
    });
    expect(pickRelease([], {}).release).toBe('0.5.23');
    // Only the first pair is the simulator's: a later --version goes to argparse.
    expect(pickRelease(['--port', '1', '--version', '0.5.4'], {}).rest).toEqual(['--port', '1', '--version', '0.5.4']);
    expect(() => pickRelease(['--version', '0.5.5'], {})).toThrow(SimReleaseError);
    expect(() => pickRelease([], { AERIE_SIM_SGLANG_VERSION: 'latest' })).toThrow(
      /AERIE_SIM_SGLANG_VERSION: .*got 'latest'/,
    );
  });

  it('refuses a release it does not imitate with exit 2, naming the ones it does', () => {
    const r = runSimCli(['sglang', '--version', '0.5.7', '--model-path', MODEL], {}, { timeoutMs: 20_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("aerie-sim: aerie-sim imitates SGLang 0.5.4, 0.5.9, 0.5.12, 0.5.23; got '0.5.7'");
  });
});

describe('rules the release table does not reach', () => {
  it('stream deltas: --stream-output makes only the ids deltas on 0.5.9, text and ids from 0.5.12', () => {
    expect(streamDeltas('0.5.4', {})).toEqual({ ids: true, text: false });
    expect(streamDeltas('0.5.9', { stream_output: true })).toEqual({ ids: true, text: false });
    expect(streamDeltas('0.5.12', { incremental_streaming_output: true })).toEqual({ ids: true, text: true });
    expect(streamDeltas('0.5.23', {})).toEqual({ ids: false, text: false });
  });

  it('spec v2: --enable-beta-spec on 0.5.4 (EAGLE only), the variable on 0.5.9 and 0.5.12 with their defaults, always on from 0.5.15', () => {
    expect(specV2('0.5.4', 'EAGLE', { enable_beta_spec: true }, {})).toMatchObject({
      v2: true,
      warnings: ['Beta spec is enabled for eagle speculative decoding and overlap schedule is turned on.'],
    });
    expect(specV2('0.5.4', 'EAGLE3', { enable_beta_spec: true }, {})).toEqual({
      disableOverlap: false,
      v2: true,
      warnings: [],
    });
    expect(specV2('0.5.9', 'EAGLE3', {}, {}).v2).toBe(false);
    expect(specV2('0.5.9', 'EAGLE3', {}, { SGLANG_ENABLE_SPEC_V2: 'True' })).toMatchObject({
      v2: true,
      disableOverlap: false,
    });
    expect(specV2('0.5.12', 'EAGLE3', {}, { SGLANG_ENABLE_SPEC_V2: 'false' }).warnings).toEqual([
      'Spec v1 is used for eagle/eagle3/standalone speculative decoding because SGLANG_ENABLE_SPEC_V2=False.',
    ]);
    expect(specV2('0.5.12', 'EAGLE', { speculative_eagle_topk: 4 }, {}).warnings).toEqual([
      'Spec v1 is used for eagle/eagle3/standalone speculative decoding because spec v2 currently only supports topk = 1.',
    ]);
    expect(specV2('0.5.23', 'EAGLE3', {}, { SGLANG_ENABLE_SPEC_V2: 'false' })).toEqual({
      disableOverlap: false,
      v2: true,
      warnings: [],
    });
    expect(specV2('0.5.23', 'EAGLE3', { disable_overlap_schedule: true }, {}).warnings).toEqual([
      'Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.',
    ]);
  });

  it('auto parameters: STANDALONE 3/1/4 and Llama 5/4/8 everywhere; DeepSeek-like lists grow; others 5/4/8 only on 0.5.4', () => {
    for (const r of ['0.5.4', '0.5.9', '0.5.12', '0.5.23'] as const) {
      expect(autoSpecParams(r, 'STANDALONE', 'LlamaForCausalLM')).toEqual([3, 1, 4]);
      expect(autoSpecParams(r, 'EAGLE3', 'LlamaForCausalLM')).toEqual([5, 4, 8]);
      expect(autoSpecParams(r, 'EAGLE', 'DeepseekV3ForCausalLM')).toEqual([3, 1, 4]);
    }
    expect(autoSpecParams('0.5.4', 'EAGLE', 'Glm4MoeForCausalLM')).toEqual([5, 4, 8]);
    expect(autoSpecParams('0.5.9', 'EAGLE', 'Glm4MoeForCausalLM')).toEqual([3, 1, 4]);
  });

  it('mixed chunk: off under EAGLE-family decoding through 0.5.12; 0.5.23 keeps it for EAGLE and EAGLE3', () => {
    expect(mixedChunkOff('0.5.12', 'EAGLE3')).toBe(
      'Mixed chunked prefill is disabled because of using eagle speculative decoding.',
    );
    expect(mixedChunkOff('0.5.23', 'EAGLE3')).toBeNull();
    expect(mixedChunkOff('0.5.23', 'STANDALONE')).toBe(
      'Mixed chunked prefill is disabled: STANDALONE speculative decoding does not support it.',
    );
  });

  it('a lower-case algorithm is taken from 0.5.12 (upper-cased after parsing)', () => {
    const target = readModelConfig(MODEL);
    const r = resolveServerArgs(
      parseLaunchArgs(['--model-path', MODEL, '--speculative-algorithm', 'eagle3'], '0.5.23'),
      target,
      readSimEnv({}, '0.5.23'),
    );
    expect(r.algorithm).toBe('EAGLE3');
    expect(() => parseLaunchArgs(['--model-path', MODEL, '--speculative-algorithm', 'eagle3'], '0.5.4')).toThrow(
      /invalid choice: 'eagle3'/,
    );
  });

  it("spec fields: 0.5.4's rate divides by steps, later ones by draft tokens - 1", () => {
    const c = { verifyCt: 10, completionTokens: 30, correctDrafts: 20, numSteps: 5, numDraftTokens: 8 };
    expect(specMeta('0.5.4', c)).toEqual({ spec_accept_rate: 20 / 50, spec_accept_length: 3, spec_verify_ct: 10 });
    expect(specMeta('0.5.9', c)).toMatchObject({
      spec_accept_rate: 20 / 70,
      spec_draft_token_num: 70,
      spec_accept_token_num: 20,
    });
  });
});
