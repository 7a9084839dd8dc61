import { describe, expect, it } from 'vitest';
import {
  parseSafetensorsHeader,
  safetensorsHeaderLength,
  SafetensorsTruncatedError,
  verifyDrafter,
  sglangEagle3ParamName,
} from '../../src/stages/train/drafter.js';

function file(header: unknown, data = Buffer.alloc(0)): Buffer {
  const json = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header), 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, json, data]);
}

const H = 8;
const V = 64;
const VD = 16;
const cfg = {
  architectures: ['LlamaForCausalLMEagle3'],
  model_type: 'llama',
  hidden_size: H,
  num_hidden_layers: 1,
  vocab_size: V,
  draft_vocab_size: VD,
};

/** A header like SpecForge's save_pretrained writes for an EAGLE-3 drafter. */
function drafterHeader(): Record<string, unknown> {
  const t: [string, string, number[]][] = [
    ['d2t', 'I64', [VD]],
    ['fc.weight', 'BF16', [H, 3 * H]],
    ['lm_head.weight', 'BF16', [VD, H]],
    ['midlayer.self_attn.q_proj.weight', 'BF16', [H, 2 * H]],
    ['norm.weight', 'BF16', [H]],
    ['t2d', 'BOOL', [V]],
  ];
  const size: Record<string, number> = { I64: 8, BF16: 2, BOOL: 1 };
  const h: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let at = 0;
  for (const [name, dtype, shape] of t) {
    const n = shape.reduce((a, b) => a * b, 1) * size[dtype];
    h[name] = { dtype, shape, data_offsets: [at, at + n] };
    at += n;
  }
  return h;
}

describe('parseSafetensorsHeader', () => {
  it('reads the little-endian length and the JSON header', () => {
    const buf = file(
      { __metadata__: { format: 'pt' }, d2t: { dtype: 'I64', shape: [2], data_offsets: [0, 16] } },
      Buffer.alloc(16),
    );
    const { headerLength, header } = parseSafetensorsHeader(buf);
    expect(headerLength).toBe(buf.length - 8 - 16);
    expect(header).toEqual({
      __metadata__: { format: 'pt' },
      d2t: { dtype: 'I64', shape: [2], data_offsets: [0, 16] },
    });
    expect(safetensorsHeaderLength(buf.subarray(0, 8))).toBe(headerLength);
  });

  it('says how many bytes to read when given too few', () => {
    const buf = file(drafterHeader());
    try {
      parseSafetensorsHeader(buf.subarray(0, 100));
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(SafetensorsTruncatedError);
      expect((e as SafetensorsTruncatedError).needBytes).toBe(buf.length);
    }
  });

  it('rejects what is not a safetensors file, with a clear reason', () => {
    expect(() => parseSafetensorsHeader(Buffer.from('abc'))).toThrow(/need 8 bytes/);
    expect(() => parseSafetensorsHeader(Buffer.from('PK\x03\x04 this is a zip (torch.save)', 'latin1'))).toThrow(
      /header length \d+ is outside/,
    );
    expect(() => parseSafetensorsHeader(file('{"d2t": '))).toThrow(/not JSON/);
    expect(() => parseSafetensorsHeader(file('[1, 2]'))).toThrow(/not a JSON object/);
    expect(() => parseSafetensorsHeader(file({ d2t: { dtype: 'I64', shape: [4], data_offsets: [0, 16] } }))).toThrow(
      /tensor "d2t" spans 16 bytes but I64\[4\] needs 32/,
    );
    expect(() => parseSafetensorsHeader(file({ fc: { dtype: 'BF16', shape: [2] } }))).toThrow(
      /tensor "fc" has no valid data_offsets/,
    );
  });
});

describe('verifyDrafter', () => {
  it('passes a servable EAGLE-3 drafter (header given bare or as parsed)', () => {
    expect(verifyDrafter(cfg, drafterHeader())).toEqual([]);
    expect(verifyDrafter(cfg, parseSafetensorsHeader(file(drafterHeader())))).toEqual([]);
  });

  it('catches the weights SGLang would silently skip', () => {
    const h = drafterHeader();
    delete h.d2t;
    delete h['fc.weight'];
    expect(verifyDrafter(cfg, h)).toEqual([
      'model.safetensors has no fc.weight: SGLang ignores missing weights silently, so the fusion of the three target hidden states would stay untrained (accept length ≈ 1)',
      'model.safetensors has no d2t: SGLang ignores missing weights silently, so draft token ids would be read as target ids, so nearly every proposal is wrong (accept length ≈ 1)',
    ]);
  });

  it('catches a config SGLang would not serve as EAGLE-3', () => {
    const { draft_vocab_size: _d, ...noDraftVocab } = cfg;
    expect(
      verifyDrafter({ ...noDraftVocab, architectures: ['LlamaForCausalLM'], num_hidden_layers: 2 }, drafterHeader()),
    ).toEqual([
      'config.json architectures is ["LlamaForCausalLM"]: SGLang\'s EAGLE3 drafter class is LlamaForCausalLMEagle3',
      'config.json has no positive integer draft_vocab_size: the draft head and d2t cannot be sized',
      'config.json num_hidden_layers is 2: an EAGLE-3 drafter has exactly 1',
    ]);
    expect(verifyDrafter('nope', drafterHeader())).toEqual(['config.json is not a JSON object']);
  });

  it('catches wrong shapes and dtypes, and prefixed weight names', () => {
    const h = drafterHeader();
    h.d2t = { dtype: 'I32', shape: [VD], data_offsets: [0, VD * 4] };
    h['fc.weight'] = { dtype: 'BF16', shape: [H, H], data_offsets: [0, H * H * 2] };
    h['draft_model.midlayer.self_attn.q_proj.weight'] = h['midlayer.self_attn.q_proj.weight'];
    delete h['midlayer.self_attn.q_proj.weight'];
    expect(verifyDrafter(cfg, h)).toEqual([
      'model.safetensors names its decoder layer "draft_model.midlayer.*": SGLang expects "midlayer.*" or "model.midlayer.*" and would ignore it',
      `d2t is I32[${VD}]: expected I64[${VD}] (one offset per draft token)`,
      `fc.weight is [${H},${H}]: expected [${H}, ${3 * H}] (hidden_size × three target hidden states)`,
    ]);
  });

  it('sizes fc from target_hidden_size when the drafter is narrower than its target', () => {
    const h = drafterHeader();
    h['fc.weight'] = { dtype: 'BF16', shape: [H, 3 * 32], data_offsets: [0, H * 96 * 2] };
    expect(verifyDrafter({ ...cfg, target_hidden_size: 32 }, h)).toEqual([]);
    expect(verifyDrafter(cfg, h)).toHaveLength(1);
  });

  // sglang==0.5.23:sglang/srt/models/llama_eagle3.py:338-378: `x` or `model.x` for modules under
  // model; lm_head only bare; d2t under any name containing it.
  it('passes a drafter whose weights carry the model. prefix, as SGLang loads them', () => {
    const h: Record<string, unknown> = {};
    for (const [name, info] of Object.entries(drafterHeader())) {
      h[name === '__metadata__' || name === 'lm_head.weight' ? name : `model.${name}`] = info;
    }
    expect(verifyDrafter(cfg, h)).toEqual([]);
  });

  it('catches model.lm_head.weight, which SGLang skips (lm_head is not under model)', () => {
    const h = drafterHeader();
    h['model.lm_head.weight'] = h['lm_head.weight'];
    delete h['lm_head.weight'];
    expect(verifyDrafter(cfg, h)).toEqual([
      'model.safetensors names it "model.lm_head.weight": SGLang loads only "lm_head.weight" (the head is not under model.) and would skip it silently, so the draft head would be random (accept length ≈ 1)',
    ]);
  });

  it('catches fc under a draft_model. prefix, which SGLang skips', () => {
    const h = drafterHeader();
    h['draft_model.fc.weight'] = h['fc.weight'];
    delete h['fc.weight'];
    expect(verifyDrafter(cfg, h)[0]).toMatch(
      /names it "draft_model\.fc\.weight": SGLang loads only "fc\.weight" or "model\.fc\.weight"/,
    );
  });
});

describe('sglangEagle3ParamName', () => {
  it("maps names as SGLang 0.5.23's EAGLE3 loader does", () => {
    expect(sglangEagle3ParamName('fc.weight')).toBe('fc.weight');
    expect(sglangEagle3ParamName('model.fc.weight')).toBe('fc.weight');
    expect(sglangEagle3ParamName('midlayer.mlp.up_proj.weight')).toBe('layers.0.mlp.up_proj.weight');
    expect(sglangEagle3ParamName('model.midlayer.mlp.up_proj.weight')).toBe('layers.0.mlp.up_proj.weight');
    expect(sglangEagle3ParamName('lm_head.weight')).toBe('lm_head.weight');
    expect(sglangEagle3ParamName('model.lm_head.weight')).toBeNull();
    expect(sglangEagle3ParamName('draft_model.d2t')).toBe('d2t');
    expect(sglangEagle3ParamName('model.t2d')).toBe('t2d');
    expect(sglangEagle3ParamName('draft_model.midlayer.mlp.up_proj.weight')).toBeNull();
    expect(sglangEagle3ParamName('aux_norm_low.weight')).toBe('fc_norm.0.weight');
  });
});
