/**
 * The capture's per-request dumps, as aerie's plugin writes them inside SGLang 0.5.23
 * (py/aerie_hs/capture.py CaptureBuffer._write, py/aerie_hs/sglang_hook.py _capture_batch):
 * `<rid>.safetensors` in the aerie-hs/1 format, under `<name>.tmp` then renamed, written
 * synchronously while the scheduler processes the prefill, so it exists before the response.
 *
 * The states are the simulated model's (lm.ts): the final post-norm state at position t is
 * norm.weight ⊙ u with rms(u) = 1 (what the model's final RMSNorm yields) and u leaning on the
 * lm_head row of succ(ids[..t]), so argmax(lm_head · h_t) = succ; the three aux blocks are
 * residual-stream-like, distinct per layer, growing with depth.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { SimLM } from './lm.js';
import { type TargetWeights, headerBytes, noise } from './weights.js';

export const FORMAT = 'aerie-hs/1';
// py/aerie_hs/capture.py:_RID: what may name a dump file.
export const RID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

export const HS_FAULTS = ['short-by-one', 'tp-rank-1', 'no-final', 'error', 'shifted'] as const;
export type HsFault = (typeof HS_FAULTS)[number];

/** sha256 of the ids as int64 little-endian (py/aerie_hs/safetensors_dump.py ids_sha256). */
export function idsSha256(ids: readonly number[]): string {
  const b = Buffer.alloc(8 * ids.length);
  ids.forEach((id, i) => b.writeBigInt64LE(BigInt(id), 8 * i));
  return createHash('sha256').update(b).digest('hex');
}

/** SGLang's capture ids: the draft ids + 1, or the model's EAGLE3 default (sglang==0.5.23:sglang/srt/models/llama.py:929-941). */
export function captureIds(draftIds: readonly number[] | null, numLayers: number): number[] {
  return draftIds ? draftIds.map((i) => i + 1) : [2, Math.floor(numLayers / 2), numLayers - 3];
}

export class HiddenStates {
  /** Per token: the unit direction (lm_head row ⊙ norm) that makes it the argmax. */
  private readonly dirCache = new Map<number, Float32Array>();

  constructor(
    readonly w: TargetWeights,
    readonly lm: SimLM,
    readonly capture: number[],
    readonly numLayers: number,
  ) {}

  get hidden(): number {
    return this.w.hidden;
  }

  private direction(token: number): Float32Array {
    let d = this.dirCache.get(token);
    if (d) return d;
    const H = this.w.hidden;
    d = this.w.headRow(token);
    let s = 0;
    for (let i = 0; i < H; i++) {
      d[i] *= this.w.norm[i];
      s += d[i] * d[i];
    }
    const k = Math.sqrt(H / (s || 1));
    for (let i = 0; i < H; i++) d[i] *= k; // rms 1
    this.dirCache.set(token, d);
    return d;
  }

  /** Final post-norm states [T, H] for `ids`, as f32. */
  final(ids: readonly number[]): Float32Array {
    const H = this.w.hidden;
    const succ = this.lm.successors(ids);
    const out = new Float32Array(ids.length * H);
    const u = new Float32Array(H);
    for (let t = 0; t < ids.length; t++) {
      const d = this.direction(succ[t]);
      // An equal share of context noise: the margin over 32k random rows stays ~4x, like a confident model.
      const g = noise(`final:${t > 0 ? ids[t - 1] : -1}:${ids[t]}:${t}`, H);
      let s = 0;
      for (let i = 0; i < H; i++) {
        u[i] = d[i] + g[i];
        s += u[i] * u[i];
      }
      const k = Math.sqrt(H / s);
      for (let i = 0; i < H; i++) out[t * H + i] = this.w.norm[i] * u[i] * k;
    }
    return out;
  }

  /** Aux states [T, 3H]: each capture layer's residual stream, mixing the token, its context and the final state. */
  aux(ids: readonly number[], final: Float32Array): Float32Array {
    const H = this.w.hidden;
    const K = this.capture.length;
    const out = new Float32Array(ids.length * K * H);
    const row = new Float32Array(H);
    for (let t = 0; t < ids.length; t++) {
      for (let j = 0; j < K; j++) {
        const depth = this.capture[j] / this.numLayers;
        const rms = 0.2 + 1.5 * depth;
        const emb = noise(`emb:${ids[t]}:${this.capture[j] >> 2}`, H);
        const ctx = noise(`aux:${this.capture[j]}:${t > 0 ? ids[t - 1] : -1}:${ids[t]}:${t}`, H);
        let s = 0;
        for (let i = 0; i < H; i++) {
          row[i] = (1 - depth) * emb[i] + 0.7 * ctx[i] + depth * final[t * H + i];
          s += row[i] * row[i];
        }
        const k = rms * Math.sqrt(H / (s || 1));
        for (let i = 0; i < H; i++) out[(t * K + j) * H + i] = row[i] * k;
      }
    }
    return out;
  }
}

/** BF16 bytes (little-endian, as the dump's readers expect; the simulator runs on little-endian hosts). */
function bf16(values: Float32Array): Buffer {
  const u = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < u.length; i++) {
    const x = u[i];
    // f32ToBf16, inlined: round to nearest even, NaN kept quiet
    out[i] = (x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0 ? 0x7fc0 : (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
  }
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

function publish(file: string, data: Buffer[]): void {
  const tmp = `${file}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  try {
    for (const d of data) fs.writeSync(fd, d);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
}

export interface CaptureOptions {
  dir: string;
  states: HiddenStates;
  fault: HsFault | null;
  /** The fault strikes every K-th real request (1 = all). */
  faultEvery: number;
  logError(msg: string): void;
}

export class CaptureWriter {
  private real = 0;

  constructor(private readonly o: CaptureOptions) {}

  get auxLayers(): number[] {
    return this.o.states.capture;
  }

  /** py/aerie_hs/sglang_hook.py _write_error: an rid that cannot name a file is only logged. */
  private writeError(rid: string, message: string): void {
    if (!RID_RE.test(rid)) {
      this.o.logError(`capture failed for unnameable rid ${JSON.stringify(rid)}: ${message}`);
      return;
    }
    publish(path.join(this.o.dir, `${rid}.error.json`), [
      Buffer.from(JSON.stringify({ format: FORMAT, rid, error: message })),
    ]);
  }

  /** One prefilled request. `counted` is false for the server's own warmup and health probes (never faulted). */
  capture(rid: string, ids: readonly number[], counted: boolean): void {
    let fault: HsFault | null = null;
    if (counted) {
      this.real++;
      if (this.o.fault && this.real % Math.max(1, this.o.faultEvery) === 0) fault = this.o.fault;
    }
    if (!RID_RE.test(rid)) {
      // py/aerie_hs/capture.py CaptureBuffer.add refuses it; _write_error then only logs.
      this.writeError(
        rid,
        `rid ${JSON.stringify(rid)} cannot name a dump file: use [A-Za-z0-9._-], at most 200 characters, not starting with '.' or '-'`,
      );
      return;
    }
    if (fault === 'error') {
      // sglang_hook.py _capture_batch's message for a prefill that came without states.
      this.writeError(
        rid,
        'the server computed no aux or final states for this prefill (a cuda-graph prefill path bypasses ' +
          'the capture: launch with --disable-cuda-graph --disable-piecewise-cuda-graph)',
      );
      return;
    }
    const st = this.o.states;
    const H = st.hidden;
    const K = st.capture.length;
    let final = st.final(ids);
    let aux = st.aux(ids, final);
    let rows = ids.length;
    if (fault === 'shifted') {
      // Each row holds the state of the token before it: a capture one token late.
      const f2 = new Float32Array(final.length);
      const a2 = new Float32Array(aux.length);
      for (let t = 0; t < rows; t++) {
        const src = Math.max(0, t - 1);
        f2.set(final.subarray(src * H, (src + 1) * H), t * H);
        a2.set(aux.subarray(src * K * H, (src + 1) * K * H), t * K * H);
      }
      final = f2;
      aux = a2;
    }
    if (fault === 'short-by-one') {
      // The last chunk's last row lost: T-1 rows, the metadata still naming the prompt.
      rows = Math.max(0, rows - 1);
      final = final.subarray(0, rows * H);
      aux = aux.subarray(0, rows * K * H);
    }
    const tensors = [{ name: 'aux_hidden_state', shape: [rows, K * H], bytes: rows * K * H * 2, data: bf16(aux) }];
    if (fault !== 'no-final')
      tensors.push({ name: 'hidden_state', shape: [rows, H], bytes: rows * H * 2, data: bf16(final) });
    const meta = {
      format: FORMAT,
      rid,
      tokens: String(ids.length),
      aux_layers: `[${st.capture.join(', ')}]`, // json.dumps spacing, as capture.py writes it
      tp_rank: fault === 'tp-rank-1' ? '1' : '0',
      input_ids_sha256: idsSha256(ids),
    };
    publish(path.join(this.o.dir, `${rid}.safetensors`), [headerBytes(tensors, meta), ...tensors.map((t) => t.data)]);
  }
}
