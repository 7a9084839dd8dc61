/**
 * Which launch of a server role a launchServer attempt is looking at: the newest recorded
 * generation (latestGeneration, shared with the job stages), or one an earlier attempt
 * started but never recorded; and which SGLang release it is rendered for.
 */
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import { launchPaths, parsePidFile } from '../hosts/records.js';
import { eagle3TargetProblem, targetArchitectures } from '../sglang/releases.js';
import { resolveSglangVersion } from '../stages/capture-launch.js';

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

/**
 * The release a launch is rendered for (server.sglang-version, resolved on the host as
 * preflight resolves it) and, for a speculative launch, whether that release can serve the
 * algorithm for this target (its config.json architectures). A problem names the field and the fix.
 */
export async function launchRelease(
  host: Host,
  config: Config,
  speculativeAlgorithm?: string,
): Promise<{ version: string; how: string } | { problem: string }> {
  const v = await resolveSglangVersion(host, config.server.launcher, config.server['sglang-version']);
  if (v.problem || v.version === undefined) return { problem: v.problem ?? 'server.sglang-version: the release could not be read' };
  if (speculativeAlgorithm !== undefined) {
    const arch = targetArchitectures(await readJsonOn(host, `${config.target['model-path']}/config.json`));
    const problem = eagle3TargetProblem(v.version, speculativeAlgorithm, arch);
    if (problem) return { problem };
  }
  return { version: v.version, how: v.how };
}

async function readJsonOn(host: Host, path: string): Promise<unknown> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8'));
  } catch {
    return undefined;
  }
}
