/**
 * Reading this machine's /proc asynchronously (never a *Sync call: a worker process also
 * heartbeats Temporal activities on the same event loop).
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import { parseProcStat, type ProcStat } from './proc-stat.js';

const PROC = '/proc';

function isGoneError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  // A process can vanish between listing /proc and reading it: ENOENT / ESRCH.
  return code === 'ENOENT' || code === 'ESRCH' || code === 'ENOTDIR';
}

export async function readProcStat(pid: number): Promise<ProcStat | null> {
  try {
    return parseProcStat(await readFile(`${PROC}/${pid}/stat`, 'utf8'));
  } catch (err) {
    if (isGoneError(err)) return null;
    throw err;
  }
}

async function listPids(): Promise<number[]> {
  const names = await readdir(PROC);
  return names.filter((n) => /^\d+$/.test(n)).map(Number);
}

/** Run fn over items with at most `width` in flight: a /proc scan touches hundreds of files. */
async function mapLimited<T, R>(items: readonly T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(width, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  });
  await Promise.all(lanes);
  return out;
}

/** Every process's parsed stat line (processes that vanish mid-scan are skipped). */
export async function scanProcStats(): Promise<ProcStat[]> {
  const stats = await mapLimited(await listPids(), 32, readProcStat);
  return stats.filter((s): s is ProcStat => s !== null);
}

export async function readCmdline(pid: number): Promise<string | undefined> {
  try {
    const raw = await readFile(`${PROC}/${pid}/cmdline`, 'utf8');
    const argv = raw.split('\0').filter((a, i, all) => a !== '' || i < all.length - 1);
    return argv.length > 0 ? argv.join(' ') : undefined;
  } catch {
    return undefined;
  }
}

/** The pid holding socket inode, by reading /proc/<pid>/fd links; undefined when none is readable. */
export async function pidOfSocketInode(inode: string): Promise<number | undefined> {
  const target = `socket:[${inode}]`;
  for (const pid of await listPids()) {
    let fds: string[];
    try {
      fds = await readdir(`${PROC}/${pid}/fd`);
    } catch {
      continue; // another user's process, or gone: best effort
    }
    for (const fd of fds) {
      try {
        if ((await readlink(`${PROC}/${pid}/fd/${fd}`)) === target) return pid;
      } catch {
        // fd closed meanwhile
      }
    }
  }
  return undefined;
}
