/**
 * The simulator target's weights: the two tensors a host-side self-check reads from a target
 * (lm_head.weight [V, H] and model.norm.weight [H], bf16), as a real safetensors file.
 *
 * `aerie-sim make-target <dir>` writes them once, deterministically (seeded Gaussian rows), and
 * the capture (capture.ts) reads them back, so the states it dumps are consistent with the very
 * file py/aerie_hs/selfcheck.py loads. safetensors layout: 8-byte little-endian header length,
 * the JSON header (padded with spaces to 8 bytes), then the raw little-endian tensor data.
 */
import fs from 'node:fs';
import path from 'node:path';
import { hash32, makeRng } from './text.js';

export const WEIGHTS_FILE = 'model.safetensors';
export const LM_HEAD = 'lm_head.weight';
export const NORM = 'model.norm.weight';
/** Llama-style init scale for the head rows; only the argmax and ratios matter to the checks. */
const HEAD_STD = 0.02;

const scratch = new Uint32Array(1);
const scratchF = new Float32Array(scratch.buffer);

export function f32ToBf16(x: number): number {
  scratchF[0] = x;
  const u = scratch[0];
  if ((u & 0x7f800000) === 0x7f800000 && (u & 0x7fffff) !== 0) return 0x7fc0;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff; // round to nearest, ties to even
}

export function bf16ToF32(b: number): number {
  scratch[0] = b << 16;
  return scratchF[0];
}

/** A Gaussian stream (Box-Muller over mulberry32) seeded by a string. */
export function gaussian(seed: string): () => number {
  const rng = makeRng(hash32(seed));
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const s = spare;
      spare = null;
      return s;
    }
    const u = 1 - rng();
    const v = rng();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
}

const TABLE_SIZE = 1 << 21;
let table: Float32Array | null = null;

/**
 * n standard-normal values picked by `seed`: a window of one fixed table of Gaussians, so the
 * states of a long prompt at hidden size 4096 cost a copy, not millions of draws. Windows at
 * hashed offsets of a 2M-value table are as good as independent for the checks' statistics.
 */
export function noise(seed: string, n: number): Float32Array {
  if (n > TABLE_SIZE / 2) {
    const g = gaussian(seed);
    return Float32Array.from({ length: n }, g);
  }
  if (!table) {
    const g = gaussian('aerie-sim noise table');
    table = new Float32Array(TABLE_SIZE);
    for (let i = 0; i < TABLE_SIZE; i++) table[i] = g();
  }
  const at = hash32(seed) % (TABLE_SIZE - n);
  return table.subarray(at, at + n);
}

export function headerBytes(
  tensors: { name: string; shape: number[]; bytes: number }[],
  metadata: Record<string, string>,
): Buffer {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let at = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: 'BF16', shape: t.shape, data_offsets: [at, at + t.bytes] };
    at += t.bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8); // data 8-byte aligned, as the format asks
  const out = Buffer.alloc(8 + Buffer.byteLength(json));
  out.writeBigUInt64LE(BigInt(Buffer.byteLength(json)), 0);
  out.write(json, 8, 'utf8');
  return out;
}

function targetTensors(vocab: number, hidden: number) {
  return [
    { name: LM_HEAD, shape: [vocab, hidden], bytes: vocab * hidden * 2 },
    { name: NORM, shape: [hidden], bytes: hidden * 2 },
  ];
}

export function expectedHeader(vocab: number, hidden: number): Buffer {
  return headerBytes(targetTensors(vocab, hidden), { format: 'pt', producer: 'aerie-sim make-target' });
}

function headRow(v: number, hidden: number, out: Buffer, at: number): void {
  const g = gaussian(`aerie-sim lm_head row ${v}`);
  for (let i = 0; i < hidden; i++) out.writeUInt16LE(f32ToBf16(g() * HEAD_STD), at + 2 * i);
}

function normWeights(hidden: number): Buffer {
  const g = gaussian('aerie-sim model.norm.weight');
  const out = Buffer.alloc(hidden * 2);
  for (let i = 0; i < hidden; i++) out.writeUInt16LE(f32ToBf16(Math.min(1.6, Math.max(0.4, 1 + 0.2 * g()))), 2 * i);
  return out;
}

/** Whether dir/model.safetensors already has exactly this header and size. */
export function weightsUpToDate(file: string, vocab: number, hidden: number): boolean {
  const want = expectedHeader(vocab, hidden);
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const got = Buffer.alloc(want.length);
      fs.readSync(fd, got, 0, want.length, 0);
      return got.equals(want) && fs.fstatSync(fd).size === want.length + vocab * hidden * 2 + hidden * 2;
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return false;
  }
}

/** Write dir/model.safetensors (temp name, then rename). Returns false when it was already there. */
export function writeTargetWeights(dir: string, vocab: number, hidden: number): boolean {
  const file = path.join(dir, WEIGHTS_FILE);
  if (weightsUpToDate(file, vocab, hidden)) return false;
  const tmp = `${file}.tmp.${process.pid}`;
  const fd = fs.openSync(tmp, 'w');
  try {
    fs.writeSync(fd, expectedHeader(vocab, hidden));
    const rows = Math.max(1, Math.floor((1 << 20) / (hidden * 2)));
    for (let v0 = 0; v0 < vocab; v0 += rows) {
      const n = Math.min(rows, vocab - v0);
      const buf = Buffer.alloc(n * hidden * 2);
      for (let r = 0; r < n; r++) headRow(v0 + r, hidden, buf, r * hidden * 2);
      fs.writeSync(fd, buf);
    }
    fs.writeSync(fd, normWeights(hidden));
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  return true;
}

export interface TargetWeights {
  /** Row v of lm_head as float32 (decoded on demand: a 4096-wide head stays as its bf16 bytes). */
  headRow(v: number): Float32Array;
  norm: Float32Array;
  vocab: number;
  hidden: number;
}

/** Read lm_head.weight and model.norm.weight (BF16) from dir/model.safetensors; null when absent. */
export function readTargetWeights(dir: string): TargetWeights | null {
  const file = path.join(dir, WEIGHTS_FILE);
  if (!fs.existsSync(file)) return null;
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const entry = (name: string) => {
    const e = header[name];
    if (!e || e.dtype !== 'BF16') throw new Error(`${file}: no BF16 tensor ${name}`);
    return { src: buf.subarray(8 + n + e.data_offsets[0], 8 + n + e.data_offsets[1]), shape: e.shape };
  };
  const decode = (src: Buffer, from: number, count: number) => {
    const out = new Float32Array(count);
    for (let i = 0; i < count; i++) out[i] = bf16ToF32(src.readUInt16LE(2 * (from + i)));
    return out;
  };
  const head = entry(LM_HEAD);
  const norm = entry(NORM);
  const [vocab, hidden] = head.shape;
  return {
    headRow: (v) => decode(head.src, v * hidden, hidden),
    norm: decode(norm.src, 0, norm.shape[0]),
    vocab,
    hidden,
  };
}
