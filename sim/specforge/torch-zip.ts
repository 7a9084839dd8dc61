/**
 * Files shaped like `torch.save` output: a zip archive (stored, no compression) holding
 * `<name>/data.pkl`, `<name>/version` and one `<name>/data/<i>` entry per tensor storage.
 * Tensor data is zeros left as a hole in a sparse file, so a simulated hidden-state set of
 * any logical size costs little disk. Anything that reads a zip's central directory (Python's
 * zipfile, aerie's verifier) sees real entry names and sizes.
 */
import { promises as fs } from 'node:fs';
import { crc32 } from 'node:zlib';

export interface ZipEntry {
  name: string;
  /** Literal bytes, or a size of zeros. */
  data: Buffer | number;
}

const ZEROS = Buffer.alloc(1 << 16);

function crcOf(data: Buffer | number): number {
  if (typeof data !== 'number') return crc32(data);
  let crc = 0;
  for (let left = data; left > 0; left -= ZEROS.length) crc = crc32(ZEROS.subarray(0, Math.min(left, ZEROS.length)), crc);
  return crc;
}

const sizeOf = (d: Buffer | number): number => (typeof d === 'number' ? d : d.length);

function localHeader(name: Buffer, crc: number, size: number): Buffer {
  const h = Buffer.alloc(30);
  h.writeUInt32LE(0x04034b50, 0);
  h.writeUInt16LE(20, 4); // version needed
  h.writeUInt16LE(0x0800, 6); // UTF-8 names
  h.writeUInt16LE(0, 8); // stored
  h.writeUInt32LE(crc >>> 0, 14);
  h.writeUInt32LE(size, 18);
  h.writeUInt32LE(size, 22);
  h.writeUInt16LE(name.length, 26);
  return Buffer.concat([h, name]);
}

function centralHeader(name: Buffer, crc: number, size: number, offset: number): Buffer {
  const h = Buffer.alloc(46);
  h.writeUInt32LE(0x02014b50, 0);
  h.writeUInt16LE(20, 4);
  h.writeUInt16LE(20, 6);
  h.writeUInt16LE(0x0800, 8);
  h.writeUInt16LE(0, 10);
  h.writeUInt32LE(crc >>> 0, 16);
  h.writeUInt32LE(size, 20);
  h.writeUInt32LE(size, 24);
  h.writeUInt16LE(name.length, 28);
  h.writeUInt32LE(offset, 42);
  return Buffer.concat([h, name]);
}

function endRecord(entries: number, cdSize: number, cdOffset: number): Buffer {
  const e = Buffer.alloc(22);
  e.writeUInt32LE(0x06054b50, 0);
  e.writeUInt16LE(entries, 8);
  e.writeUInt16LE(entries, 10);
  e.writeUInt32LE(cdSize, 12);
  e.writeUInt32LE(cdOffset, 16);
  return e;
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
    const head = localHeader(name, crc, size);
    parts.push({ at, bytes: head });
    if (typeof e.data !== 'number') parts.push({ at: at + head.length, bytes: e.data });
    central.push(centralHeader(name, crc, size, at));
    at += head.length + size;
  }
  const cd = Buffer.concat(central);
  parts.push({ at, bytes: cd });
  parts.push({ at: at + cd.length, bytes: endRecord(entries.length, cd.length, at) });
  return { size: at + cd.length + 22, parts };
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

/** The entries torch.save writes for one hidden-state record of `tokens` tokens at hidden size H. */
export function hiddenStateEntries(record: string, tokens: number, hidden: number): ZipEntry[] {
  const pkl = Buffer.from(`aerie-sim: stands in for the pickle of {input_ids, loss_mask, hidden_state [1,${tokens},${hidden}], aux_hidden_state [1,${tokens},${3 * hidden}]}\n`);
  return [
    { name: `${record}/data.pkl`, data: pkl },
    { name: `${record}/byteorder`, data: Buffer.from('little') },
    { name: `${record}/data/0`, data: tokens * 8 }, // input_ids int64
    { name: `${record}/data/1`, data: tokens * 8 }, // loss_mask int64
    { name: `${record}/data/2`, data: tokens * hidden * 2 }, // hidden_state bf16
    { name: `${record}/data/3`, data: tokens * 3 * hidden * 2 }, // aux_hidden_state bf16
    { name: `${record}/version`, data: Buffer.from('3\n') },
  ];
}
