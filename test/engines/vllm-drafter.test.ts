import { describe, expect, it } from 'vitest';
import { defaultAuxLayers, parseSafetensorsHeader, vllmDrafterProblems } from '../../src/engines/index.js';

const target = (layers: number) => ({
  architectures: ['LlamaForCausalLM'],
  num_hidden_layers: layers,
  hidden_size: 128,
  vocab_size: 32000,
});
const draft = (extra: Record<string, unknown> = {}) => ({
  architectures: ['LlamaForCausalLMEagle3'],
  hidden_size: 128,
  num_hidden_layers: 1,
  vocab_size: 32000,
  draft_vocab_size: 4096,
  ...extra,
});
const TENSORS = ['midlayer.self_attn.q_proj.weight', 'fc.weight', 'norm.weight', 'lm_head.weight', 'd2t', 't2d'];

describe("vLLM's EAGLE-3 loader rules, checked before launch", () => {
  it('passes a SpecForge-layout drafter of an 8-layer target', () => {
    expect(
      vllmDrafterProblems({ algorithm: 'EAGLE3', draftConfig: draft(), targetConfig: target(8), tensorNames: TENSORS }),
    ).toEqual([]);
  });

  it('refuses d2t beside a full draft vocab (the load fails: no draft_id_to_target_id)', () => {
    const p = vllmDrafterProblems({
      algorithm: 'EAGLE3',
      draftConfig: draft({ draft_vocab_size: 32000 }),
      targetConfig: target(8),
      tensorNames: TENSORS,
    });
    expect(p).toHaveLength(1);
    expect(p[0]).toMatch(/draft_vocab_size \(32000\) equals the target's vocab \(32000\).*draft_id_to_target_id/);
  });

  it('refuses a smaller draft vocab without d2t', () => {
    const p = vllmDrafterProblems({
      algorithm: 'EAGLE3',
      draftConfig: draft(),
      targetConfig: target(8),
      tensorNames: TENSORS.filter((t) => t !== 'd2t'),
    });
    expect(p[0]).toMatch(/no d2t tensor/);
  });

  it("refuses a 4-layer target's collapsed default layers (2, 2, 1): ready, then death on the first decode", () => {
    expect(defaultAuxLayers(4)).toEqual([2, 2, 1]);
    expect(defaultAuxLayers(8)).toEqual([2, 4, 5]);
    const p = vllmDrafterProblems({
      algorithm: 'EAGLE3',
      draftConfig: draft(),
      targetConfig: target(4),
      tensorNames: TENSORS,
    });
    expect(p[0]).toMatch(/\[2,2,1\] \(vLLM's default for a 4-layer target.*not three distinct layers/);
    // The draft config's own ids win, top level or in SpecForge's eagle_config, and are checked against the depth.
    const own = vllmDrafterProblems({
      algorithm: 'EAGLE3',
      draftConfig: draft({ eagle_config: { eagle_aux_hidden_state_layer_ids: [0, 1, 2] } }),
      targetConfig: target(4),
    });
    expect(own).toEqual([]);
    const outside = vllmDrafterProblems({
      algorithm: 'EAGLE3',
      draftConfig: draft({ eagle_aux_hidden_state_layer_ids: [1, 3, 9] }),
      targetConfig: target(8),
    });
    expect(outside[0]).toMatch(/9 outside 0..7/);
  });

  it("refuses EAGLE with an EAGLE-3 drafter (incident 3) and another target's drafter", () => {
    expect(vllmDrafterProblems({ algorithm: 'EAGLE', draftConfig: draft(), targetConfig: target(8) })[0]).toMatch(
      /EAGLE3/,
    );
    expect(
      vllmDrafterProblems({
        algorithm: 'EAGLE3',
        draftConfig: draft({ hidden_size: 256 }),
        targetConfig: target(8),
      })[0],
    ).toMatch(/hidden size 256 but the target's is 128/);
  });

  it('reads tensor names from a safetensors header', () => {
    const header = Buffer.from(
      JSON.stringify({ __metadata__: {}, d2t: { dtype: 'I64', shape: [2], data_offsets: [0, 16] } }),
    );
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    expect(parseSafetensorsHeader(Buffer.concat([len, header, Buffer.alloc(16)]))).toEqual(['d2t']);
    expect(() => parseSafetensorsHeader(Buffer.from('xx'))).toThrow(/not a safetensors file/);
  });
});

describe('the auxiliary layers each engine feeds', () => {
  it('vLLM takes the ids as the state entering layer id; SGLang the output of layer id (one later)', async () => {
    const { servedHiddenStateIndices } = await import('../../src/engines/index.js');
    expect(servedHiddenStateIndices('vllm', [1, 3, 5])).toEqual([1, 3, 5]);
    expect(servedHiddenStateIndices('sglang', [1, 3, 5])).toEqual([2, 4, 6]);
  });

  it('refuses ids out of ascending order: vLLM feeds them sorted', () => {
    const p = vllmDrafterProblems({
      algorithm: 'EAGLE3',
      draftConfig: draft({ eagle_aux_hidden_state_layer_ids: [5, 1, 3] }),
      targetConfig: target(8),
    });
    expect(p[0]).toMatch(/not in ascending order/);
  });
});
