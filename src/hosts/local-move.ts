/**
 * Host.moveFiles on this machine: rename(2) when it can, and across filesystems (the dump
 * dir is tmpfs, the output a disk) a copy that only ever appears at the destination whole.
 */
import { constants } from 'node:fs';
import { copyFile, open, rename, rm, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { FileMove, MoveOutcome } from './host.js';
import { fsyncDir, statPath, tempNameFor } from './local-fs.js';

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}

/**
 * Copy to a temp name beside `to` (same filesystem, so the final rename is atomic), fsync it,
 * rename it into place, and only then unlink `from`: a crash at any point leaves either the
 * old state or a whole `to`, plus at most a hidden temp file.
 */
async function copyAcross(from: string, to: string): Promise<void> {
  const tmp = tempNameFor(to);
  try {
    // COPYFILE_EXCL: the temp name is ours alone; copy_file_range/sendfile do the bytes in-kernel.
    await copyFile(from, tmp, constants.COPYFILE_EXCL);
    const handle = await open(tmp, 'r+');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, to);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await unlink(from).catch((err: unknown) => {
    // Gone already is the goal; anything else leaves a second copy, which the caller must hear about.
    if (errnoOf(err) !== 'ENOENT') throw err;
  });
}

/** One move; returns whether it crossed filesystems (its directory then needs an fsync). */
async function moveOne(m: FileMove): Promise<'renamed' | 'copied'> {
  try {
    await rename(m.from, m.to);
    return 'renamed';
  } catch (err) {
    if (errnoOf(err) === 'EXDEV') {
      await copyAcross(m.from, m.to);
      return 'copied';
    }
    // Same rule as SshHost, where a batch can run twice: source gone and destination there is done.
    if (errnoOf(err) === 'ENOENT' && !(await statPath(m.from)) && (await statPath(m.to))) return 'renamed';
    throw err;
  }
}

export async function moveFiles(moves: readonly FileMove[]): Promise<MoveOutcome[]> {
  const out: MoveOutcome[] = [];
  const copiedInto = new Set<string>();
  for (const m of moves) {
    try {
      if ((await moveOne(m)) === 'copied') copiedInto.add(dirname(m.to));
      out.push({ ok: true });
    } catch (err) {
      out.push({ ok: false, error: (err as Error).message ?? String(err) });
    }
  }
  // The renames into place are made durable once per directory, not once per file.
  for (const dir of copiedInto) await fsyncDir(dir);
  return out;
}
