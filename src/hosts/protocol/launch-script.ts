/**
 * The shell side of the remote process protocol, as text. The host writes the wrapper to
 * <procs>/<launchId>.sh (mode 0600) and runs `sh <that file>` as the leader of a new
 * session: LocalHost with spawn(..., {detached: true}) (which calls setsid), SshHost with
 * renderDetachedLaunch over its connection. The environment goes into the file rather
 * than onto a command line, because every user can read command lines in `ps`. Every value
 * is quoted by hosts/util/shell-quote.ts; nothing from a config is ever spliced in raw.
 */
import { shAssignments, shJoin, shQuote } from '../util/index.js';
import type { LaunchPaths } from './records.js';
import { assertLaunchToken, isAbsolutePath, LAUNCH_TOKEN_ENV } from './records.js';

export interface LaunchSpec {
  launchId: string;
  argv: readonly string[];
  env?: Record<string, string>;
  /** Absolute directory to run in; the wrapper's own directory when absent. */
  cwd?: string;
  /** Absolute log file; stdout and stderr are appended to it. */
  logPath: string;
  paths: LaunchPaths;
  /** Exported as AERIE_LAUNCH to the command, so its descendants carry it whatever session they end up in. */
  token?: string;
}

function dirOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

function checkSpec(spec: LaunchSpec): void {
  if (spec.argv.length === 0) throw new Error(`launch ${spec.launchId}: empty argv`);
  if (!isAbsolutePath(spec.logPath))
    throw new Error(`launch ${spec.launchId}: logPath must be absolute: ${spec.logPath}`);
  if (spec.cwd !== undefined && !isAbsolutePath(spec.cwd))
    throw new Error(`launch ${spec.launchId}: cwd must be absolute: ${spec.cwd}`);
  if (spec.token !== undefined) {
    assertLaunchToken(spec.token);
    if (spec.env && LAUNCH_TOKEN_ENV in spec.env) {
      throw new Error(
        `launch ${spec.launchId}: env sets ${LAUNCH_TOKEN_ENV}, which aerie sets itself to find the launch's processes; remove it from the env`,
      );
    }
  }
}

/**
 * The wrapper, run as `sh <script file>` as the leader of a new session and process group:
 *  1. ignore-but-catch TERM/INT/HUP, so stopping the group ends the command first and the
 *     wrapper lives on to record its status (a caught signal is reset to default in the
 *     command, an ignored one would be inherited — hence ':' rather than '');
 *  2. write "<pid> <starttime> [<token>]" atomically to the .pid file (refuse to run untracked);
 *  3. run argv with stdin from /dev/null, stdout+stderr appended to the log, and with
 *     AERIE_LAUNCH=<token> exported: /proc/<pid>/environ is fixed at exec, so the wrapper
 *     itself does not show it, but everything it starts does (the group finds the wrapper);
 *  4. write the exit status atomically to the .exit file.
 */
export function renderLaunchScript(spec: LaunchSpec): string {
  checkSpec(spec);
  const { paths } = spec;
  const pidTmp = `${paths.pid}.tmp`;
  const exitTmp = `${paths.exit}.tmp`;
  const run = [...shAssignments(spec.env), shJoin(spec.argv)].join(' ');
  const body = spec.cwd !== undefined ? `cd ${shQuote(spec.cwd)} && ${run}` : run;
  const token = spec.token === undefined ? '' : ` ${shQuote(spec.token)}`;
  const mark =
    spec.token === undefined ? [] : [`${LAUNCH_TOKEN_ENV}=${shQuote(spec.token)}; export ${LAUNCH_TOKEN_ENV}`];
  return [
    `# aerie launch ${spec.launchId}`,
    'trap : TERM INT HUP',
    'set -f',
    `mkdir -p ${shQuote(paths.dir)} ${shQuote(dirOf(spec.logPath))} || exit 125`,
    // Field 22 of our own stat line; the wrapper's command name is the shell's, without spaces.
    'aerie_stat=; read -r aerie_stat < /proc/$$/stat',
    'set -- $aerie_stat',
    `printf '%s %s${spec.token === undefined ? '' : ' %s'}\\n' "$$" "\${22:-}"${token} > ${shQuote(pidTmp)} && mv -f ${shQuote(pidTmp)} ${shQuote(paths.pid)} || exit 125`,
    ...mark,
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

/**
 * $1 token, $2 a marker nonce: every stat line, the marker, then — read after its environ —
 * the stat line of each of our own processes (`-O`: owned by our uid) whose environment
 * holds AERIE_LAUNCH=$1 exactly (grep -z: one NUL-separated entry per "line"; -x, -F: the
 * whole entry, no pattern). One exec per scan; parse with parseLaunchScan. The nonce keeps
 * a process named like the marker (a command name is the process's own choice) from
 * splitting the output where it likes.
 */
export const PROC_LAUNCH_SCAN = [
  'cat /proc/[0-9]*/stat 2>/dev/null',
  `printf '\\n#marked-%s\\n' "$2"`,
  'for f in $(grep -lzxF -e "AERIE_LAUNCH=$1" /proc/[0-9]*/environ 2>/dev/null); do',
  '  p=${f%/environ}',
  '  [ -O "$p" ] && cat "$p/stat" 2>/dev/null',
  'done',
  'exit 0',
].join('\n');

/** Exit status of PROCESS_SIGNAL when the pid is gone, a zombie, or started at another time. */
export const EXIT_NOT_THAT_PROCESS = 3;

/**
 * $1 pid, $2 its start time, $3 TERM or KILL: signal that one process only if its stat line
 * still shows that start time (field 22, counted after the last ')' like proc-stat.ts).
 */
export const PROCESS_SIGNAL = [
  'pid=$1 want=$2 sig=$3',
  `line=; read -r line 2>/dev/null < "/proc/$pid/stat" || exit ${EXIT_NOT_THAT_PROCESS}`,
  'set -f; set -- ${line##*)}',
  `[ "$#" -ge 20 ] && [ "\${20}" = "$want" ] && [ "$1" != Z ] || exit ${EXIT_NOT_THAT_PROCESS}`,
  'exec kill -s "$sig" -- "$pid"',
].join('\n');
