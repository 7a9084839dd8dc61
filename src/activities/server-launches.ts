/**
 * Which launch of a server role a launchServer attempt is looking at: the newest recorded
 * generation, or one an earlier attempt started but never recorded.
 */
import type { Host, ProcRecord } from '../hosts/host.js';
import { launchPaths, parsePidFile } from '../hosts/records.js';

/**
 * Whether the port's holder is this very launch, started by an earlier attempt whose link or
 * worker was lost before the launch record was written: its wrapper's pid file is there and
 * leads the holder's process group. spawnDetached then adopts it instead of starting another.
 */
export async function startedButUnrecorded(host: Host, launchId: string, holderPgid: number | undefined): Promise<boolean> {
  if (holderPgid === undefined) return false;
  const pidFile = launchPaths(host.workdir, launchId).pid;
  if (!(await host.stat(pidFile))) return false;
  const started = parsePidFile((await host.readFile(pidFile)).toString('utf8'));
  return started !== null && started.pid === holderPgid;
}

/** Highest generation number among this run's launches of a role, and its record. */
export async function latestLaunch(host: Host, prefix: string): Promise<{ gen: number; record: ProcRecord } | null> {
  let best: { gen: number; record: ProcRecord } | null = null;
  for (const r of await host.listLaunches()) {
    if (!r.launchId.startsWith(prefix)) continue;
    const gen = Number(r.launchId.slice(prefix.length));
    if (Number.isInteger(gen) && (!best || gen > best.gen)) best = { gen, record: r };
  }
  return best;
}

export function sameArgv(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
