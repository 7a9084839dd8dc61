/**
 * The simulator's torch.save files against one made by real torch 2.13.0
 * (test/fixtures/real/torch-2.13.0, see PROVENANCE.md there): the same tensors written by
 * sim/specforge/torch-zip.ts give the same bytes but the 40-digit serialization id (and the
 * CRCs that cover it); the pickle alone is identical; entries are stored and 64-aligned.
 */
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  hiddenStateEntries,
  pickleTensorDict,
  planZip,
  torchSaveEntries,
  writeZip,
  type TensorSpec,
} from '../../sim/specforge/torch-zip.js';
import { useWorkdir } from '../support/workdir.js';

const FIXTURE = resolve(import.meta.dirname, '../fixtures/real/torch-2.13.0/data_0.ckpt');
const T = 16;
const H = 8;

const longs = (xs: number[]): Buffer => {
  const b = Buffer.alloc(xs.length * 8);
  xs.forEach((x, i) => b.writeBigInt64LE(BigInt(x), i * 8));
  return b;
};
/** float32 → bf16, round to nearest even, as torch's .to(torch.bfloat16). */
const bf16 = (xs: number[]): Buffer => {
  const b = Buffer.alloc(xs.length * 2);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  xs.forEach((x, i) => {
    f[0] = x;
    const bits = u[0]!;
    b.writeUInt16LE(((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff, i * 2);
  });
  return b;
};
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** The tensors make_fixture.py saves. */
const FIXTURE_TENSORS: TensorSpec[] = [
  { key: 'input_ids', dtype: 'int64', shape: [T], data: longs(range(T).map((i) => 100 + i)) },
  { key: 'loss_mask', dtype: 'int64', shape: [T], data: longs(range(T).map((i) => (i < 6 ? 0 : 1))) },
  { key: 'aux_hidden_state', dtype: 'bfloat16', shape: [1, T, 3 * H], data: bf16(range(T * 3 * H).map((i) => i / 64)) },
  { key: 'hidden_state', dtype: 'bfloat16', shape: [1, T, H], data: bf16(range(T * H).map((i) => -i / 32)) },
];

interface Local {
  at: number;
  name: string;
  flags: number;
  method: number;
  dataAt: number;
  extraId: string;
}

/** Walks the local headers (torch writes sizes in data descriptors, so sizes come from the directory). */
function layout(b: Buffer): { locals: Local[]; sizes: number[]; tail: string } {
  const eocd = b.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  const entries = b.readUInt16LE(eocd + 10);
  let cd = b.readUInt32LE(eocd + 16);
  const locals: Local[] = [];
  const sizes: number[] = [];
  for (let i = 0; i < entries; i++) {
    const nameLen = b.readUInt16LE(cd + 28);
    const at = b.readUInt32LE(cd + 42);
    sizes.push(b.readUInt32LE(cd + 24));
    const ln = b.readUInt16LE(at + 26);
    const le = b.readUInt16LE(at + 28);
    locals.push({
      at,
      name: b
        .subarray(at + 30, at + 30 + ln)
        .toString()
        .replace(/^[^/]+\//, ''),
      flags: b.readUInt16LE(at + 6),
      method: b.readUInt16LE(at + 8),
      dataAt: at + 30 + ln + le,
      extraId: b.subarray(at + 30 + ln, at + 32 + ln).toString('latin1'),
    });
    cd += 46 + nameLen + b.readUInt16LE(cd + 30) + b.readUInt16LE(cd + 32);
  }
  const tail = [0x06064b50, 0x07064b50, 0x06054b50]
    .map((sig) => (b.indexOf(Buffer.from(new Uint32Array([sig]).buffer)) >= 0 ? 'y' : 'n'))
    .join('');
  return { locals, sizes, tail };
}

const tmp = useWorkdir('aerie-torchzip-', { each: true });
let dir: string;
beforeEach(() => void (dir = tmp.path));

describe('sim torch-zip against a file real torch.save wrote', () => {
  it('the same tensors give the same bytes, the serialization id (and its CRC) aside', async () => {
    const real = await readFile(FIXTURE);
    await writeZip(join(dir, 'data_0.ckpt'), torchSaveEntries('data_0', FIXTURE_TENSORS));
    const sim = await readFile(join(dir, 'data_0.ckpt'));
    expect(sim.length).toBe(real.length);
    const differing: number[] = [];
    for (let i = 0; i < sim.length; i++) if (sim[i] !== real[i]) differing.push(i);
    const id = layout(real).locals.find((l) => l.name === '.data/serialization_id')!;
    // The id's 40 digits, the CRC in its data descriptor (after the 4-byte signature), and the
    // CRC in its directory entry, the last one (+16 into a 46-byte header and a 29-byte name).
    const dirEnd = real.lastIndexOf(Buffer.from([0x50, 0x4b, 0x06, 0x06]));
    const lastEntry = dirEnd - (46 + '.data/serialization_id'.length + 'data_0/'.length);
    const allowed = (i: number): boolean =>
      (i >= id.dataAt && i < id.dataAt + 40) ||
      (i >= id.dataAt + 44 && i < id.dataAt + 48) ||
      (i >= lastEntry + 16 && i < lastEntry + 20);
    expect(differing.filter((i) => !allowed(i))).toEqual([]);
    expect(differing.length).toBeGreaterThan(0);
  });

  it('data.pkl is byte for byte the pickle torch writes', async () => {
    const real = await readFile(FIXTURE);
    const pklAt = layout(real).locals[0]!;
    expect(pklAt.name).toBe('data.pkl');
    const { pickle, storages } = pickleTensorDict(FIXTURE_TENSORS);
    expect(pickle.equals(real.subarray(pklAt.dataAt, pklAt.dataAt + layout(real).sizes[0]!))).toBe(true);
    expect(storages.map((s) => (typeof s === 'number' ? s : s.length))).toEqual([128, 128, 768, 256]);
  });

  it("a hidden-state record has torch's entries in torch's order, stored, 64-aligned, with data descriptors", async () => {
    const real = layout(await readFile(FIXTURE));
    await writeZip(join(dir, 'data_7.ckpt'), hiddenStateEntries('data_7', T, H));
    const sim = layout(await readFile(join(dir, 'data_7.ckpt')));
    expect(sim.locals.map((l) => l.name)).toEqual(real.locals.map((l) => l.name));
    expect(sim.sizes).toEqual(real.sizes);
    expect(sim.tail).toBe('yyy');
    for (const l of sim.locals) expect(l).toMatchObject({ flags: 0x0808, method: 0, extraId: 'FB' });
    for (const l of sim.locals) expect(l.dataAt % 64).toBe(0);
    expect(sim.locals.map((l) => l.at)).toEqual(real.locals.map((l) => l.at));
  });

  it('states of any logical size cost only their headers on disk, and a cut leaves no directory', async () => {
    const entries = hiddenStateEntries('data_0', 2048, 4096);
    const { size } = planZip(entries);
    expect(size).toBeGreaterThan(2048 * 4 * 4096 * 2);
    const half = await writeZip(join(dir, 'cut.ckpt'), entries, Math.floor(size / 2));
    const b = await readFile(join(dir, 'cut.ckpt'));
    expect(b.length).toBe(half);
    expect(b.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))).toBe(-1);
  });

  it("v0.2 records keep DataPoint's key order; ids and mask are written as given", () => {
    const cli = pickleTensorDict([]).pickle; // an empty dict pickles as EMPTY_DICT, BINPUT, STOP
    expect([...cli]).toEqual([0x80, 2, 0x7d, 0x71, 0, 0x2e]);
    const v02 = hiddenStateEntries('d', 3, 2, { order: 'v0.2', inputIds: [5, 6, 7], lossMask: [0, 1, 1] });
    const pkl = (v02[0]!.data as Buffer).toString('latin1');
    expect(pkl.indexOf('hidden_state')).toBeLessThan(pkl.indexOf('aux_hidden_state'));
    expect((v02.find((e) => e.name === 'd/data/0')!.data as Buffer).readBigInt64LE(16)).toBe(7n);
    expect(() => hiddenStateEntries('d', 3, 2, { inputIds: [1] })).toThrow(/1 values for 3 tokens/);
  });
});
