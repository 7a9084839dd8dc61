/**
 * py/aerie_hs/capture.py's CaptureBuffer with python3 and no torch: pieces are raw BF16 bytes.
 * The dump is read back here by a reader of this test's own (the safetensors layout: u64 header
 * length, JSON header, data), not by aerie's Python.
 */
import { mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { pythonOut } from '../support/python.js';
import { useWorkdir } from '../support/workdir.js';

const ROOT = resolve(import.meta.dirname, '../..');
const tmp = useWorkdir('aerie-capture-');
let cases = 0;

/** Runs `body` with `buf`, `H`, `piece(n, seed)` and `out` defined; prints what it returns as JSON. */
function py(body: string, tpRank = 0): { out: string; result: unknown } {
  const out = join(tmp.path, `case-${++cases}`);
  mkdirSync(out);
  const src = `
import json, struct, sys
sys.path.insert(0, ${JSON.stringify(join(ROOT, 'py'))})
from aerie_hs.capture import CaptureBuffer, CaptureError
H = 4
out = ${JSON.stringify(out)}
buf = CaptureBuffer(out, [2, 4, 5], H, tp_rank=${tpRank})
def piece(n, first, width):
    # row r, column c holds the BF16 of (first + r) * 16 + c: exact in BF16 below 256
    vals = [float((first + r) * 16 + c) for r in range(n) for c in range(width)]
    return b"".join(struct.pack("<f", v)[2:] for v in vals)
def run():
${body
  .split('\n')
  .map((l) => '    ' + l)
  .join('\n')}
try:
    r = run()
except CaptureError as e:
    r = {"error": str(e)}
print(json.dumps(r))
`;
  const stdout = pythonOut(src);
  return { out, result: JSON.parse(stdout) };
}

function readDump(path: string) {
  const b = readFileSync(path);
  const n = Number(b.readBigUInt64LE(0));
  const header = JSON.parse(b.subarray(8, 8 + n).toString('utf8'));
  const base = 8 + n;
  const tensor = (name: string) => {
    const t = header[name];
    const raw = b.subarray(base + t.data_offsets[0], base + t.data_offsets[1]);
    const vals: number[] = [];
    for (let i = 0; i < raw.length; i += 2)
      vals.push(new Float32Array(new Uint32Array([raw.readUInt16LE(i) << 16]).buffer)[0]!);
    return { dtype: t.dtype, shape: t.shape, vals };
  };
  return {
    header,
    meta: header.__metadata__,
    aux: tensor('aux_hidden_state'),
    hidden: tensor('hidden_state'),
    size: b.length,
    end: base + Math.max(header.aux_hidden_state.data_offsets[1], header.hidden_state.data_offsets[1]),
  };
}

const ids = [5, 6, 7, 8, 9];
const ID = JSON.stringify(ids);

describe('CaptureBuffer', () => {
  it('stitches chunked-prefill pieces in order into one dump with the COMMON.md metadata', () => {
    const { out, result } = py(`
a = buf.add("s-1", ${ID}, 0, piece(2, 0, 12), piece(2, 0, 4))
b = buf.add("s-1", ${ID}, 2, piece(3, 2, 12), piece(3, 2, 4))
return [a, b, buf.pending()]`);
    const [a, b, pending] = result as [string | null, string, object];
    expect(a).toBeNull();
    expect(b).toBe(join(out, 's-1.safetensors'));
    expect(pending).toEqual({});
    expect(readdirSync(out)).toEqual(['s-1.safetensors']);
    const d = readDump(b);
    expect(d.end).toBe(d.size);
    expect(d.aux).toMatchObject({ dtype: 'BF16', shape: [5, 12] });
    expect(d.hidden).toMatchObject({ dtype: 'BF16', shape: [5, 4] });
    expect(d.aux.vals[3 * 12 + 7]).toBe(3 * 16 + 7);
    expect(d.hidden.vals[4 * 4 + 3]).toBe(4 * 16 + 3);
    const sha = createHash('sha256');
    const le = Buffer.alloc(8 * ids.length);
    ids.forEach((v, i) => le.writeBigInt64LE(BigInt(v), 8 * i));
    expect(d.meta).toEqual({
      format: 'aerie-hs/1',
      rid: 's-1',
      tokens: '5',
      aux_layers: '[2, 4, 5]',
      tp_rank: '0',
      input_ids_sha256: sha.update(le).digest('hex'),
    });
  });

  it('refuses a piece out of order (a gap) and one that overlaps, and writes nothing', () => {
    const gap = py(`
buf.add("s-2", ${ID}, 0, piece(2, 0, 12), piece(2, 0, 4))
buf.add("s-2", ${ID}, 3, piece(2, 3, 12), piece(2, 3, 4))`);
    expect((gap.result as { error: string }).error).toMatch(/piece at token 3 leaves a gap after the 2 tokens/);
    expect(readdirSync(gap.out)).toEqual([]);
    const overlap = py(`
buf.add("s-3", ${ID}, 0, piece(3, 0, 12), piece(3, 0, 4))
buf.add("s-3", ${ID}, 2, piece(3, 2, 12), piece(3, 2, 4))`);
    expect((overlap.result as { error: string }).error).toMatch(/piece at token 2 overlaps the 3 tokens/);
    expect(readdirSync(overlap.out)).toEqual([]);
  });

  it('refuses a first piece that does not start at token 0 (a radix-cache hit)', () => {
    const r = py(`buf.add("s-4", ${ID}, 2, piece(3, 2, 12), piece(3, 2, 4))`);
    expect((r.result as { error: string }).error).toMatch(/--disable-radix-cache/);
  });

  it('never writes a request short by one token', () => {
    const { out, result } = py(`
buf.add("s-5", ${ID}, 0, piece(4, 0, 12), piece(4, 0, 4))
return buf.pending()`);
    expect(result).toEqual({ 's-5': 4 });
    expect(readdirSync(out)).toEqual([]);
  });

  it('writes nothing on a second TP rank', () => {
    const { out, result } = py(`return [buf.add("s-6", ${ID}, 0, piece(5, 0, 12), piece(5, 0, 4)), buf.pending()]`, 1);
    expect(result).toEqual([null, {}]);
    expect(readdirSync(out)).toEqual([]);
  });

  it('refuses pieces whose widths disagree with the layers and hidden size', () => {
    const r = py(`buf.add("s-7", ${ID}, 0, piece(5, 0, 8), piece(5, 0, 4))`);
    expect((r.result as { error: string }).error).toMatch(/aux piece holds 40 values, expected 5 rows x 3 layers x 4/);
  });

  it('maps SpecForge default aux layers to SGLang capture ids', () => {
    const r = py(`
from aerie_hs.capture import specforge_default_aux_layers, sglang_capture_ids, sglang_default_capture_ids
out = []
for L in (4, 32, 61):
    out.append([sglang_capture_ids(specforge_default_aux_layers(L), L), sglang_default_capture_ids(L)])
try:
    sglang_capture_ids([3], 4)
except CaptureError as e:
    out.append(str(e))
return out`);
    const [a, b, c, err] = r.result as [number[][], number[][], number[][], string];
    expect(a[0]).toEqual(a[1]);
    expect(b).toEqual([
      [2, 16, 29],
      [2, 16, 29],
    ]);
    expect(c).toEqual([
      [2, 30, 58],
      [2, 30, 58],
    ]);
    expect(err).toMatch(/aux layer ids \[3\] cannot be captured on a 4-layer target/);
  });
});
