/**
 * Files as `torch.save` writes them, so that a real `torch.load` (weights_only=True, mmap=True)
 * opens what the simulator leaves behind. The layout is torch 2.13.0's writer, read off a file
 * it made (test/fixtures/real/torch-2.13.0/data_0.ckpt):
 *
 *   <archive>/data.pkl                 protocol-2 pickle of the object (torch-pickle.ts); each tensor is
 *                                      torch._utils._rebuild_tensor_v2 over a persistent-id
 *                                      storage ('storage', torch.<T>Storage, key, 'cpu', numel)
 *   <archive>/.format_version          "1"
 *   <archive>/.storage_alignment       "64"
 *   <archive>/byteorder                "little"
 *   <archive>/data/<key>               the storage's raw little-endian bytes
 *   <archive>/version                  "3\n"
 *   <archive>/.data/serialization_id   40 digits
 *
 * Every entry is stored (no compression) with general-purpose flags 0x0808 (UTF-8 names, sizes
 * in a data descriptor after the data), zero times, and an extra field "FB" of 'Z' padding that
 * puts the data at a multiple of 64 bytes — what lets torch mmap a storage in place. The
 * directory ends with a zip64 end record, its locator, and the classic end record.
 *
 * Tensor data left out is zeros, written as a hole in a sparse file, so a simulated
 * hidden-state set of any logical size costs little disk.
 */
import { promises as fs } from 'node:fs';
import { crc32 } from 'node:zlib';
import { pickleTensorDict, type TensorSpec } from './torch-pickle.js';

export { pickleTensorDict, type DType, type TensorSpec } from './torch-pickle.js';

export interface ZipEntry {
  name: string;
  /** Literal bytes, or a size of zeros. */
  data: Buffer | number;
}

/** torch's kFieldAlignment (caffe2/serialize/inline_container.cc) and `.storage_alignment`. */
const ALIGN = 64;
const ZEROS = Buffer.alloc(1 << 16);

function crcOf(data: Buffer | number): number {
  if (typeof data !== 'number') return crc32(data);
  let crc = 0;
  for (let left = data; left > 0; left -= ZEROS.length)
    crc = crc32(ZEROS.subarray(0, Math.min(left, ZEROS.length)), crc);
  return crc;
}

const sizeOf = (d: Buffer | number): number => (typeof d === 'number' ? d : d.length);

/** Local header with sizes and CRC left to the data descriptor, padded so the data is aligned. */
function localHeader(name: Buffer, at: number): Buffer {
  const pad = (ALIGN - ((at + 30 + name.length + 4) % ALIGN)) % ALIGN;
  const h = Buffer.alloc(30);
  h.writeUInt32LE(0x04034b50, 0);
  h.writeUInt16LE(0x0808, 6);
  h.writeUInt16LE(name.length, 26);
  h.writeUInt16LE(4 + pad, 28);
  const extra = Buffer.alloc(4 + pad, 'Z');
  extra.write('FB', 0, 'latin1');
  extra.writeUInt16LE(pad, 2);
  return Buffer.concat([h, name, extra]);
}

function dataDescriptor(crc: number, size: number): Buffer {
  const d = Buffer.alloc(16);
  d.writeUInt32LE(0x08074b50, 0);
  d.writeUInt32LE(crc >>> 0, 4);
  d.writeUInt32LE(size, 8);
  d.writeUInt32LE(size, 12);
  return d;
}

function centralHeader(name: Buffer, crc: number, size: number, offset: number): Buffer {
  const h = Buffer.alloc(46);
  h.writeUInt32LE(0x02014b50, 0);
  h.writeUInt16LE(0x0808, 8);
  h.writeUInt32LE(crc >>> 0, 16);
  h.writeUInt32LE(size, 20);
  h.writeUInt32LE(size, 24);
  h.writeUInt16LE(name.length, 28);
  h.writeUInt32LE(offset, 42);
  return Buffer.concat([h, name]);
}

function endRecords(entries: number, cdSize: number, cdOffset: number): Buffer {
  const z64 = Buffer.alloc(56);
  z64.writeUInt32LE(0x06064b50, 0);
  z64.writeBigUInt64LE(44n, 4);
  z64.writeUInt16LE(0x031e, 12); // version made by, as torch's miniz writes it
  z64.writeUInt16LE(0x2d, 14); // version needed: zip64
  z64.writeBigUInt64LE(BigInt(entries), 24);
  z64.writeBigUInt64LE(BigInt(entries), 32);
  z64.writeBigUInt64LE(BigInt(cdSize), 40);
  z64.writeBigUInt64LE(BigInt(cdOffset), 48);
  const loc = Buffer.alloc(20);
  loc.writeUInt32LE(0x07064b50, 0);
  loc.writeBigUInt64LE(BigInt(cdOffset + cdSize), 8);
  loc.writeUInt32LE(1, 16);
  const e = Buffer.alloc(22);
  e.writeUInt32LE(0x06054b50, 0);
  e.writeUInt16LE(entries, 8);
  e.writeUInt16LE(entries, 10);
  e.writeUInt32LE(cdSize, 12);
  e.writeUInt32LE(cdOffset, 16);
  return Buffer.concat([z64, loc, e]);
}

/** The archive's total size and where each piece goes, without writing anything. */
export function planZip(entries: ZipEntry[]): { size: number; parts: { at: number; bytes: Buffer }[] } {
  const parts: { at: number; bytes: Buffer }[] = [];
  const central: Buffer[] = [];
  let at = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name, 'utf8');
    const size = sizeOf(e.data);
    const crc = crcOf(e.data);
    const head = localHeader(name, at);
    parts.push({ at, bytes: head });
    if (typeof e.data !== 'number') parts.push({ at: at + head.length, bytes: e.data });
    parts.push({ at: at + head.length + size, bytes: dataDescriptor(crc, size) });
    central.push(centralHeader(name, crc, size, at));
    at += head.length + size + 16;
  }
  const cd = Buffer.concat(central);
  const tail = endRecords(entries.length, cd.length, at);
  parts.push({ at, bytes: cd }, { at: at + cd.length, bytes: tail });
  return { size: at + cd.length + tail.length, parts };
}

/**
 * Write the archive at path, in place (like torch.save: no temp name). With `truncateAt`,
 * stop there as a crash mid-write would: the tail, with the zip directory, never arrives.
 */
export async function writeZip(path: string, entries: ZipEntry[], truncateAt?: number): Promise<number> {
  const { size, parts } = planZip(entries);
  const end = truncateAt === undefined ? size : Math.min(size, truncateAt);
  const fh = await fs.open(path, 'w');
  try {
    await fh.truncate(end);
    for (const p of parts) {
      if (p.at >= end) continue;
      const n = Math.min(p.bytes.length, end - p.at);
      await fh.write(p.bytes, 0, n, p.at);
    }
  } finally {
    await fh.close();
  }
  return end;
}

/**
 * A 40-digit id of the shape torch writes (20 digits from the records' CRCs, 20 from their
 * names). torch's digits come from c10::hash, which is not reproducible here; torch.load never
 * checks them, it only carries the id along.
 */
function serializationId(entries: ZipEntry[]): string {
  let crcs = 0n;
  let names = 0n;
  for (const e of entries) {
    crcs = (crcs * 31n + BigInt(crcOf(e.data) >>> 0)) % 10n ** 20n;
    names = (names * 131n + BigInt(crc32(Buffer.from(e.name)) >>> 0)) % 10n ** 20n;
  }
  return crcs.toString().padStart(20, '0') + names.toString().padStart(20, '0');
}

/**
 * The entries of `torch.save(dict)` for named tensors, in torch's order. `archive` is what
 * torch names the top folder: the file's name without its extension when saving to a path,
 * "archive" when saving to a file object (SpecForge's --compress writes through gzip.open).
 */
export function torchSaveEntries(archive: string, tensors: TensorSpec[]): ZipEntry[] {
  const { pickle, storages } = pickleTensorDict(tensors);
  const entries: ZipEntry[] = [
    { name: `${archive}/data.pkl`, data: pickle },
    { name: `${archive}/.format_version`, data: Buffer.from('1') },
    { name: `${archive}/.storage_alignment`, data: Buffer.from(String(ALIGN)) },
    { name: `${archive}/byteorder`, data: Buffer.from('little') },
    ...storages.map((s, i) => ({ name: `${archive}/data/${i}`, data: s })),
    { name: `${archive}/version`, data: Buffer.from('3\n') },
  ];
  entries.push({ name: `${archive}/.data/serialization_id`, data: Buffer.from(serializationId(entries)) });
  return entries;
}

export interface HiddenStateValues {
  inputIds?: number[];
  lossMask?: number[];
  /**
   * Key order of the dict. SpecForge@73e6f808:scripts/prepare_hidden_states.py:64-68 saves
   * `asdict(DataPoint)`: input_ids, loss_mask, hidden_state, aux_hidden_state. From the
   * capture-layout refactor (SpecForge@a6b6b023:specforge/algorithms/common/providers.py:458-481
   * with the eagle3 layout of scripts/prepare_hidden_states.py:468-476) the aux state comes first.
   */
  order?: 'v0.2' | 'cli';
}

/**
 * One record of SpecForge's offline EAGLE-3 features, as prepare_hidden_states.py saves it:
 * input_ids int64 [T], loss_mask int64 [T] (1-D: SpecForge@a6b6b023:specforge/algorithms/eagle3/data.py:15-18
 * slices then unsqueezes them), hidden_state [1,T,H] and aux_hidden_state [1,T,3H] in the
 * target's dtype, bf16 here (the `.unsqueeze(0)` of SpecForge@a6b6b023:scripts/prepare_hidden_states.py:710-718;
 * keys SpecForge@a6b6b023:specforge/runtime/data_plane/offline_reader.py:46 and
 * specforge/algorithms/eagle3/providers.py:141-150). States are zeros.
 */
export function hiddenStateEntries(
  archive: string,
  tokens: number,
  hidden: number,
  v: HiddenStateValues = {},
): ZipEntry[] {
  const longs = (xs: number[] | undefined): Buffer | undefined => {
    if (!xs) return undefined;
    if (xs.length !== tokens) throw new Error(`hiddenStateEntries: ${xs.length} values for ${tokens} tokens`);
    const b = Buffer.alloc(tokens * 8);
    xs.forEach((x, i) => b.writeBigInt64LE(BigInt(x), i * 8));
    return b;
  };
  const ids: TensorSpec = { key: 'input_ids', dtype: 'int64', shape: [tokens], data: longs(v.inputIds) };
  const mask: TensorSpec = { key: 'loss_mask', dtype: 'int64', shape: [tokens], data: longs(v.lossMask) };
  const last: TensorSpec = { key: 'hidden_state', dtype: 'bfloat16', shape: [1, tokens, hidden] };
  const aux: TensorSpec = { key: 'aux_hidden_state', dtype: 'bfloat16', shape: [1, tokens, 3 * hidden] };
  return torchSaveEntries(archive, v.order === 'v0.2' ? [ids, mask, last, aux] : [ids, mask, aux, last]);
}
