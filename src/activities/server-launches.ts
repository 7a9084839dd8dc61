/**
 * Which launch of a server role a launchServer attempt is looking at: the newest recorded
 * generation (latestGeneration, shared with the job stages), or one an earlier attempt
 * started but never recorded.
 */
import type { Host } from '../hosts/host.js';
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

export function sameArgv(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
