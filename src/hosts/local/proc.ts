/**
 * Reading this machine's /proc asynchronously (never a *Sync call: a worker process also
 * heartbeats Temporal activities on the same event loop).
 */
import { readdir, readFile, readlink, stat } from 'node:fs/promises';
import type { LaunchScan } from '../protocol/index.js';
import { isDead, parseProcStat, type ProcStat, assertLaunchToken, LAUNCH_TOKEN_ENV } from '../protocol/index.js';

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

/**
 * Every process, plus those of our uid whose environment holds AERIE_LAUNCH=<token> exactly
 * (each re-read after its environ, for proc-identity's start-time check). Other users'
 * processes and unreadable environs are skipped: a launch of ours runs as us.
 */
export async function scanLaunchProcs(token: string): Promise<LaunchScan> {
  assertLaunchToken(token);
  const stats = await scanProcStats();
  const uid = process.geteuid?.();
  const needle = `\0${LAUNCH_TOKEN_ENV}=${token}\0`;
  const marked = await mapLimited(stats, 32, async (s): Promise<ProcStat | null> => {
    if (isDead(s) || uid === undefined) return null;
    try {
      if ((await stat(`${PROC}/${s.pid}`)).uid !== uid) return null;
      const env = await readFile(`${PROC}/${s.pid}/environ`, 'latin1');
      if (!`\0${env}\0`.includes(needle)) return null;
      return await readProcStat(s.pid);
    } catch {
      return null; // gone, or not readable: not a process we may count as ours
    }
  });
  return { stats, marked: marked.filter((m): m is ProcStat => m !== null) };
}

/** Signal pid only while it is the process that started at startTime (never a recycled pid). */
export async function signalProcessIfSame(pid: number, startTime: string, signal: 'TERM' | 'KILL'): Promise<boolean> {
  if (!Number.isSafeInteger(pid) || pid <= 1) throw new Error(`refusing to signal process ${pid}`);
  const now = await readProcStat(pid);
  if (now === null || isDead(now) || startTime === '' || now.startTime !== startTime) return false;
  try {
    process.kill(pid, `SIG${signal}`);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
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
