import { describe, expect, it } from 'vitest';
import { checkDrafterCompat, draftArchitectures } from '../../src/sglang/drafter-check.js';

// The draft config.json SpecForge writes for an EAGLE-3 drafter of a 7168-wide target.
const EAGLE3_DRAFT = {
  architectures: ['LlamaForCausalLMEagle3'],
  model_type: 'llama',
  hidden_size: 7168,
  intermediate_size: 18432,
  num_attention_heads: 64,
  num_key_value_heads: 64,
  num_hidden_layers: 1,
  vocab_size: 163840,
  draft_vocab_size: 32000,
  max_position_embeddings: 2048,
  torch_dtype: 'bfloat16',
};
const EAGLE2_DRAFT = { ...EAGLE3_DRAFT, architectures: ['LlamaForCausalLMEagle'] };
const SMALL_LM = { ...EAGLE3_DRAFT, architectures: ['LlamaForCausalLM'], num_hidden_layers: 16 };

describe('checkDrafterCompat (incident 3)', () => {
  it('refuses EAGLE with an EAGLE-3 drafter, naming both and the fix', () => {
    const msg = checkDrafterCompat('EAGLE', EAGLE3_DRAFT);
    expect(msg).toContain('--speculative-algorithm EAGLE cannot serve an EAGLE-3 drafter (LlamaForCausalLMEagle3)');
    expect(msg).toContain('accept length 1.00');
    expect(msg).toMatch(/Fix: use --speculative-algorithm EAGLE3$/);
  });

  it('refuses NEXTN (which SGLang runs as EAGLE) with an EAGLE-3 drafter', () => {
    expect(checkDrafterCompat('NEXTN', EAGLE3_DRAFT)).toMatch(
      /^--speculative-algorithm NEXTN cannot serve an EAGLE-3 drafter/,
    );
  });

  it('refuses STANDALONE with an EAGLE-3 drafter', () => {
    expect(checkDrafterCompat('STANDALONE', EAGLE3_DRAFT)).toMatch(/Fix: use --speculative-algorithm EAGLE3$/);
  });

  it('accepts EAGLE3 with an EAGLE-3 drafter, given parsed or as config.json text', () => {
    expect(checkDrafterCompat('EAGLE3', EAGLE3_DRAFT)).toBeNull();
    expect(checkDrafterCompat('EAGLE3', JSON.stringify(EAGLE3_DRAFT))).toBeNull();
    expect(checkDrafterCompat('eagle3', { architectures: ['Eagle3LlamaForCausalLM'] })).toBeNull();
  });

  it('refuses EAGLE3 with an EAGLE-2 drafter or an ordinary model', () => {
    expect(checkDrafterCompat('EAGLE3', EAGLE2_DRAFT)).toMatch(
      /^--speculative-algorithm EAGLE3 needs an EAGLE-3 drafter, but the draft config\.json has architectures \["LlamaForCausalLMEagle"\]/,
    );
    expect(checkDrafterCompat('EAGLE3', SMALL_LM)).toContain('["LlamaForCausalLM"]');
  });

  it('refuses EAGLE3 when the draft config cannot show what it is', () => {
    expect(checkDrafterCompat('EAGLE3', { model_type: 'llama' })).toMatch(/has no "architectures" list/);
    expect(checkDrafterCompat('EAGLE3', 'not json')).toMatch(/has no "architectures" list/);
    expect(checkDrafterCompat('EAGLE3', null)).toMatch(/has no "architectures" list/);
  });

  it('accepts the combinations that work', () => {
    expect(checkDrafterCompat('EAGLE', EAGLE2_DRAFT)).toBeNull();
    expect(checkDrafterCompat('STANDALONE', SMALL_LM)).toBeNull();
    expect(checkDrafterCompat('NEXTN', { architectures: ['DeepseekV3ForCausalLM'] })).toBeNull();
    expect(checkDrafterCompat('NGRAM', undefined)).toBeNull();
  });
});

describe('draftArchitectures', () => {
  it('reads the architectures list and rejects malformed ones', () => {
    expect(draftArchitectures(EAGLE3_DRAFT)).toEqual(['LlamaForCausalLMEagle3']);
    expect(draftArchitectures({ architectures: [] })).toBeUndefined();
    expect(draftArchitectures({ architectures: [42] })).toBeUndefined();
    expect(draftArchitectures([EAGLE3_DRAFT])).toBeUndefined();
  });
});
