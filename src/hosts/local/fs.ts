/**
 * File operations on this machine with the guarantees the Host interface promises:
 * atomic replace, tailing by byte offset, absent-is-null stat. All asynchronous.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, readdir, rename, rm, stat as fsStat, statfs } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { FileStat } from '../host.js';
import { completeUtf8Length } from '../util/index.js';

export const DEFAULT_TAIL_BYTES = 256 * 1024;

function isAbsent(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** Flush a directory entry change (the rename) to disk; some filesystems refuse, which is fine. */
export async function fsyncDir(dir: string): Promise<void> {
  let handle;
  try {
    handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    await handle.sync();
  } catch {
    // EINVAL/EISDIR on filesystems that cannot fsync directories
  } finally {
    await handle?.close();
  }
}

/** The temp file sits next to the target (same filesystem, so rename is atomic) and is hidden. */
export function tempNameFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
}

export async function writeFileAtomic(path: string, data: string | Buffer, mode = 0o644): Promise<void> {
  const tmp = tempNameFor(path);
  try {
    const handle = await open(tmp, 'wx', mode);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await fsyncDir(dirname(path));
}

export async function appendFile(path: string, data: string | Buffer): Promise<void> {
  const handle = await open(path, 'a');
  try {
    await handle.writeFile(data);
  } finally {
    await handle.close();
  }
}

export async function statPath(path: string): Promise<FileStat | null> {
  try {
    const s = await fsStat(path);
    return { path, size: s.size, isDirectory: s.isDirectory(), mtimeMs: s.mtimeMs };
  } catch (err) {
    if (isAbsent(err)) return null;
    throw err;
  }
}

/** Entries of dir, sorted by name; an entry removed while listing is left out. */
export async function listDir(dir: string): Promise<FileStat[]> {
  const names = (await readdir(dir)).sort();
  const stats = await Promise.all(names.map((n) => statPath(join(dir, n))));
  return stats.filter((s): s is FileStat => s !== null);
}

export async function removePath(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true });
}

/**
 * Bytes of path from offset on, at most maxBytes, cut at a character boundary; the new
 * offset says where to continue. An absent file reads as nothing yet (a log the process
 * has not created); a file shorter than offset was truncated or replaced, so it is read
 * again from the start.
 */
export async function tailFrom(
  path: string,
  offset: number,
  maxBytes = DEFAULT_TAIL_BYTES,
): Promise<{ data: string; offset: number }> {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new Error(`tailFrom: bad offset ${offset}`);
  if (!Number.isSafeInteger(maxBytes) || maxBytes <= 0) throw new Error(`tailFrom: bad maxBytes ${maxBytes}`);
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (err) {
    if (isAbsent(err)) return { data: '', offset };
    throw err;
  }
  try {
    const { size } = await handle.stat();
    const from = size < offset ? 0 : offset;
    const want = Math.min(maxBytes, size - from);
    if (want <= 0) return { data: '', offset: from };
    const buf = Buffer.alloc(want);
    const { bytesRead } = await handle.read(buf, 0, want, from);
    const read = buf.subarray(0, bytesRead);
    // Keep a character split by the read for the next call, unless that would mean no progress.
    const keep = completeUtf8Length(read) || read.length;
    return { data: read.subarray(0, keep).toString('utf8'), offset: from + keep };
  } finally {
    await handle.close();
  }
}

export async function freeBytes(path: string): Promise<number> {
  const s = await statfs(path);
  return s.bavail * s.bsize;
}

export { rename as renamePath };
