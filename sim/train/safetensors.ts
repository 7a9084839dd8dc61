/**
 * The drafter's model.safetensors as SpecForge's save_pretrained writes it for an EAGLE-3
 * Llama drafter: every weight except the frozen embedding, full shapes from the draft config,
 * bf16 weights, int64 `d2t`, bool `t2d`.
 *
 * Weight matrices are all zeros and the file is extended with ftruncate, so a drafter for an
 * 8B target costs a few hundred KiB of disk however large its logical size; only the norms
 * and the vocabulary maps are written byte by byte.
 */
import { promises as fs } from 'node:fs';

export type Dtype = 'BF16' | 'I64' | 'BOOL';
const DTYPE_BYTES: Record<Dtype, number> = { BF16: 2, I64: 8, BOOL: 1 };

export interface TensorPlan {
  name: string;
  dtype: Dtype;
  shape: number[];
  /** Bytes to place at the tensor's start; absent = zeros. */
  fill?: 'ones-bf16' | 'd2t' | 't2d';
}

export interface DraftDims {
  hidden: number;
  intermediate: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocab: number;
  draftVocab: number;
  targetHidden: number;
}

const posInt = (v: unknown): number | undefined =>
  Number.isInteger(v) && (v as number) > 0 ? (v as number) : undefined;

/** Reads the sizes SpecForge's LlamaForCausalLMEagle3 builds from; throws naming the first missing one. */
export function draftDims(cfg: Record<string, unknown>): DraftDims {
  const need = (k: string): number => {
    const v = posInt(cfg[k]);
    if (v === undefined) throw new Error(`'LlamaConfig' object has no attribute '${k}'`);
    return v;
  };
  const hidden = need('hidden_size');
  const heads = need('num_attention_heads');
  return {
    hidden,
    intermediate: need('intermediate_size'),
    heads,
    kvHeads: posInt(cfg.num_key_value_heads) ?? heads,
    headDim: posInt(cfg.head_dim) ?? Math.floor(hidden / heads),
    vocab: need('vocab_size'),
    draftVocab: need('draft_vocab_size'),
    targetHidden: posInt(cfg.target_hidden_size) ?? hidden,
  };
}

export function drafterTensors(d: DraftDims): TensorPlan[] {
  const H = d.hidden;
  const bf = (name: string, shape: number[], fill?: TensorPlan['fill']): TensorPlan => ({
    name,
    dtype: 'BF16',
    shape,
    fill,
  });
  return [
    { name: 'd2t', dtype: 'I64', shape: [d.draftVocab], fill: 'd2t' },
    bf('fc.weight', [H, 3 * d.targetHidden]),
    bf('lm_head.weight', [d.draftVocab, H]),
    bf('midlayer.hidden_norm.weight', [H], 'ones-bf16'),
    bf('midlayer.input_layernorm.weight', [H], 'ones-bf16'),
    bf('midlayer.mlp.down_proj.weight', [H, d.intermediate]),
    bf('midlayer.mlp.gate_proj.weight', [d.intermediate, H]),
    bf('midlayer.mlp.up_proj.weight', [d.intermediate, H]),
    bf('midlayer.post_attention_layernorm.weight', [H], 'ones-bf16'),
    bf('midlayer.self_attn.k_proj.weight', [d.kvHeads * d.headDim, 2 * H]),
    bf('midlayer.self_attn.o_proj.weight', [H, d.heads * d.headDim]),
    bf('midlayer.self_attn.q_proj.weight', [d.heads * d.headDim, 2 * H]),
    bf('midlayer.self_attn.v_proj.weight', [d.kvHeads * d.headDim, 2 * H]),
    bf('norm.weight', [H], 'ones-bf16'),
    { name: 't2d', dtype: 'BOOL', shape: [d.vocab], fill: 't2d' },
  ];
}

const numel = (shape: number[]): number => shape.reduce((a, b) => a * b, 1);

/**
 * The draft vocabulary: draft id i stands for target id floor(i·V/Vd), spread over the whole
 * target vocabulary. `d2t[i]` is the offset (target = i + d2t[i]); `t2d` marks kept target ids.
 */
export function vocabMap(vocab: number, draftVocab: number): { targetIds: number[] } {
  const targetIds: number[] = [];
  for (let i = 0; i < draftVocab; i++) targetIds.push(Math.floor((i * vocab) / draftVocab));
  return { targetIds };
}

function fillBytes(t: TensorPlan, d: DraftDims): Buffer | undefined {
  if (t.fill === 'ones-bf16') {
    const b = Buffer.alloc(numel(t.shape) * 2);
    for (let i = 0; i < b.length; i += 2) b.writeUInt16LE(0x3f80, i);
    return b;
  }
  const { targetIds } = vocabMap(d.vocab, d.draftVocab);
  if (t.fill === 'd2t') {
    const b = Buffer.alloc(d.draftVocab * 8);
    targetIds.forEach((tid, i) => b.writeBigInt64LE(BigInt(tid - i), i * 8));
    return b;
  }
  if (t.fill === 't2d') {
    const b = Buffer.alloc(d.vocab);
    for (const tid of targetIds) b[tid] = 1;
    return b;
  }
  return undefined;
}

/** The header JSON (with data_offsets) and the total data size, for a list of tensors in file order. */
export function buildHeader(tensors: TensorPlan[]): {
  header: Buffer;
  dataBytes: number;
  offsets: Map<string, number>;
} {
  const obj: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  const offsets = new Map<string, number>();
  let at = 0;
  for (const t of tensors) {
    const len = numel(t.shape) * DTYPE_BYTES[t.dtype];
    obj[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + len] };
    offsets.set(t.name, at);
    at += len;
  }
  let json = JSON.stringify(obj);
  json += ' '.repeat((8 - (json.length % 8)) % 8); // keeps the data 8-byte aligned, as safetensors does
  return { header: Buffer.from(json, 'utf8'), dataBytes: at, offsets };
}

export async function writeDrafterSafetensors(path: string, dims: DraftDims): Promise<void> {
  const tensors = drafterTensors(dims);
  const { header, dataBytes, offsets } = buildHeader(tensors);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(header.length));
  const dataStart = 8 + header.length;
  const fh = await fs.open(path, 'w');
  try {
    await fh.write(Buffer.concat([prefix, header]), 0, dataStart, 0);
    await fh.truncate(dataStart + dataBytes);
    for (const t of tensors) {
      const bytes = fillBytes(t, dims);
      if (bytes) await fh.write(bytes, 0, bytes.length, dataStart + (offsets.get(t.name) ?? 0));
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
}
