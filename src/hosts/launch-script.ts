/**
 * The shell side of the remote process protocol, as text. The host writes the wrapper to
 * <procs>/<launchId>.sh (mode 0600) and runs `sh <that file>` as the leader of a new
 * session: LocalHost with spawn(..., {detached: true}) (which calls setsid), SshHost with
 * renderDetachedLaunch over its connection. The environment goes into the file rather
 * than onto a command line, because every user can read command lines in `ps`. Every value
 * is quoted by shell-quote.ts; nothing from a config is ever spliced in raw.
 */
import { shAssignments, shJoin, shQuote } from './shell-quote.js';
import type { LaunchPaths } from './records.js';
import { isAbsolutePath } from './records.js';

export interface LaunchSpec {
  launchId: string;
  argv: readonly string[];
  env?: Record<string, string>;
  /** Absolute directory to run in; the wrapper's own directory when absent. */
  cwd?: string;
  /** Absolute log file; stdout and stderr are appended to it. */
  logPath: string;
  paths: LaunchPaths;
}

function dirOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

function checkSpec(spec: LaunchSpec): void {
  if (spec.argv.length === 0) throw new Error(`launch ${spec.launchId}: empty argv`);
  if (!isAbsolutePath(spec.logPath)) throw new Error(`launch ${spec.launchId}: logPath must be absolute: ${spec.logPath}`);
  if (spec.cwd !== undefined && !isAbsolutePath(spec.cwd)) throw new Error(`launch ${spec.launchId}: cwd must be absolute: ${spec.cwd}`);
}

/**
 * The wrapper, run as `sh <script file>` as the leader of a new session and process group:
 *  1. ignore-but-catch TERM/INT/HUP, so stopping the group ends the command first and the
 *     wrapper lives on to record its status (a caught signal is reset to default in the
 *     command, an ignored one would be inherited — hence ':' rather than '');
 *  2. write "<pid> <starttime>" atomically to the .pid file (refuse to run untracked);
 *  3. run argv with stdin from /dev/null, stdout+stderr appended to the log;
 *  4. write the exit status atomically to the .exit file.
 */
export function renderLaunchScript(spec: LaunchSpec): string {
  checkSpec(spec);
  const { paths } = spec;
  const pidTmp = `${paths.pid}.tmp`;
  const exitTmp = `${paths.exit}.tmp`;
  const run = [...shAssignments(spec.env), shJoin(spec.argv)].join(' ');
  const body = spec.cwd !== undefined ? `cd ${shQuote(spec.cwd)} && ${run}` : run;
  return [
    `# aerie launch ${spec.launchId}`,
    'trap : TERM INT HUP',
    'set -f',
    `mkdir -p ${shQuote(paths.dir)} ${shQuote(dirOf(spec.logPath))} || exit 125`,
    // Field 22 of our own stat line; the wrapper's command name is the shell's, without spaces.
    'aerie_stat=; read -r aerie_stat < /proc/$$/stat',
    'set -- $aerie_stat',
    `printf '%s %s\\n' "$$" "\${22:-}" > ${shQuote(pidTmp)} && mv -f ${shQuote(pidTmp)} ${shQuote(paths.pid)} || exit 125`,
    `{ ${body}; } < /dev/null >> ${shQuote(spec.logPath)} 2>&1`,
    'aerie_code=$?',
    `printf '%s\\n' "$aerie_code" > ${shQuote(exitTmp)} && mv -f ${shQuote(exitTmp)} ${shQuote(paths.exit)}`,
    'exit "$aerie_code"',
    '',
  ].join('\n');
}

/** argv that runs a written wrapper file (LocalHost spawns this detached). */
export function wrapperArgv(paths: LaunchPaths): string[] {
  return ['/bin/sh', paths.script];
}

/**
 * One shell command that starts the written wrapper detached in a new session and returns
 * at once (for SshHost). In a non-interactive shell a background job is not a group
 * leader, so setsid(1) calls setsid() in place and the wrapper's pid is the group's id.
 */
export function renderDetachedLaunch(paths: LaunchPaths): string {
  return `setsid ${shJoin(wrapperArgv(paths))} < /dev/null > /dev/null 2>&1 &`;
}

/** `kill` to a whole process group (for SshHost); pgid must be a real group, never 0 or 1. */
export function renderGroupSignal(pgid: number, signal: 'TERM' | 'KILL'): string {
  if (!Number.isSafeInteger(pgid) || pgid <= 1) throw new Error(`refusing to signal process group ${pgid}`);
  return `kill -s ${signal} -- -${pgid}`;
}

/** Prints every process's stat line (for SshHost; parse with parseProcStats). */
export const PROC_STAT_SCAN = 'cat /proc/[0-9]*/stat 2>/dev/null; exit 0';
