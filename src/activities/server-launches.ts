/**
 * Which launch of a server role a launchServer attempt is looking at: the newest recorded
 * generation (latestGeneration, shared with the job stages), or one an earlier attempt
 * started but never recorded; and which SGLang release it is rendered for.
 */
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import { launchPaths, parsePidFile } from '../hosts/index.js';
import { eagle3TargetProblem, targetArchitectures } from '../sglang/releases.js';
import { resolveSglangVersion } from '../stages/extract/index.js';
import { serverWarnings } from '../sglang/log-phase.js';
import { vllmWarnings } from '../engines/index.js';
import { renderStartupRecord, startupRecordPath } from '../sglang/readiness.js';
import { fatal } from './context.js';
import type { ServerLaunch, ServerReady } from './server-types.js';

/**
 * Whether the port's holder is this very launch, started by an earlier attempt whose link or
 * worker was lost before the launch record was written: its wrapper's pid file is there and
 * leads the holder's process group. spawnDetached then adopts it instead of starting another.
 */
export async function startedButUnrecorded(
  host: Host,
  launchId: string,
  holderPgid: number | undefined,
): Promise<boolean> {
  if (holderPgid === undefined) return false;
  const pidFile = launchPaths(host.workdir, launchId).pid;
  if (!(await host.stat(pidFile))) return false;
  const started = parsePidFile((await host.readFile(pidFile)).toString('utf8'));
  return started !== null && started.pid === holderPgid;
}

export function sameArgv(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The host's SGLang release and how it was found (preflight's result, passed on to each launch). */
export interface SglangRelease {
  version: string;
  how: string;
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
  resolved?: SglangRelease,
): Promise<SglangRelease | { problem: string }> {
  // Preflight's answer when the workflow passes it on; else read the same way preflight reads it.
  const v = resolved ?? (await resolveSglangVersion(host, config.server.launcher, config.server['sglang-version']));
  if ('problem' in v && v.problem) return { problem: v.problem };
  if (v.version === undefined) return { problem: 'server.sglang-version: the release could not be read' };
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

/** Startup warnings are printed first; this much of the log head is read for them. */
const WARNINGS_HEAD = 4 << 20;

/** Warnings and aerie's notes, written next to the server log and returned for the stage's record. */
export async function keepStartupRecord(
  host: Host,
  launch: ServerLaunch,
  endpoint: '/health' | '/health_generate',
  readyAfterMs: number,
  notes: string[],
): Promise<ServerReady> {
  const head = await host.tailFrom(launch.logPath, 0, WARNINGS_HEAD).catch(() => ({ data: '' }));
  const warnings = launch.engine === 'vllm' ? vllmWarnings(head.data) : serverWarnings(head.data);
  const path = startupRecordPath(launch.logPath);
  const text = renderStartupRecord({
    launchId: launch.launchId,
    argv: launch.argv,
    readyAfterMs,
    endpoint,
    notes: [...launch.notes, ...notes],
    warnings,
  });
  await host.writeFileAtomic(path, text);
  return { elapsedMs: readyAfterMs, phase: 'ready', warnings, notes, startupRecord: path };
}

export async function readJson(host: Host, path: string): Promise<unknown> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8'));
  } catch (err) {
    throw fatal('ConfigError', `cannot read ${path} on ${host.name}: ${(err as Error).message}`);
  }
}
