/**
 * Where launch records live and how they are read back. Shared by LocalHost and SshHost:
 * everything here is plain path arithmetic and parsing, no filesystem access.
 *
 * Per launch, in <workdir>/.aerie/procs/:
 *   <launchId>.sh    the launch wrapper (mode 0600: it holds the command's environment,
 *                    which may carry tokens, so it is kept out of every `ps` listing)
 *   <launchId>.pid   "<pid> <starttime> [<token>]" written by the launch wrapper before the command runs
 *   <launchId>.exit  the command's exit status, written by the wrapper when it ends
 *   <launchId>.json  the ProcRecord, written by the host after the launch
 */
import { createHash, randomBytes } from 'node:crypto';
import type { ProcRecord } from '../host.js';

const LAUNCH_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

/** Launch ids become file names on the host, so only safe file-name characters pass. */
export function assertLaunchId(launchId: string): void {
  if (!LAUNCH_ID.test(launchId)) {
    throw new Error(
      `invalid launch id ${JSON.stringify(launchId)}: use letters, digits, '.', '_' and '-' (first a letter or digit, at most 200)`,
    );
  }
}

export function procsDir(workdir: string): string {
  return `${workdir.replace(/\/+$/, '')}/.aerie/procs`;
}

export interface LaunchPaths {
  dir: string;
  record: string;
  script: string;
  pid: string;
  exit: string;
}

export function launchPaths(workdir: string, launchId: string): LaunchPaths {
  assertLaunchId(launchId);
  const dir = procsDir(workdir);
  return {
    dir,
    record: `${dir}/${launchId}.json`,
    script: `${dir}/${launchId}.sh`,
    pid: `${dir}/${launchId}.pid`,
    exit: `${dir}/${launchId}.exit`,
  };
}

/** The launch id a record file name belongs to, or null for other files (tmp files, pid files). */
export function launchIdOfRecordFile(fileName: string): string | null {
  if (!fileName.endsWith('.json')) return null;
  const id = fileName.slice(0, -'.json'.length);
  return LAUNCH_ID.test(id) ? id : null;
}

/** The environment variable that marks every process of a launch (ProcRecord.token). */
export const LAUNCH_TOKEN_ENV = 'AERIE_LAUNCH';

const TOKEN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,239}$/;

/**
 * A fresh token for a launch: its id plus 64 random bits, so a launch with the same id in
 * another work directory (or an earlier run) on the same host never matches it.
 */
export function newLaunchToken(launchId: string): string {
  assertLaunchId(launchId);
  return `${launchId}-${randomBytes(8).toString('hex')}`;
}

/** Tokens travel into a shell script and a grep pattern: only file-name characters pass. */
export function assertLaunchToken(token: string): void {
  if (!TOKEN.test(token)) throw new Error(`invalid launch token ${JSON.stringify(token)}`);
}

export function argvHash(argv: readonly string[]): string {
  return createHash('sha256').update(JSON.stringify(argv)).digest('hex');
}

/**
 * What the wrapper wrote to the .pid file; startTime is '' when /proc could not be read.
 * The token is there for wrappers that mark their launch (older ones wrote two fields).
 */
export function parsePidFile(text: string): { pid: number; startTime: string; token?: string } | null {
  const m = /^\s*(\d+)(?:[ \t]+(\d+))?(?:[ \t]+([A-Za-z0-9][A-Za-z0-9._-]*))?\s*$/.exec(text);
  if (!m) return null;
  const pid = Number(m[1]);
  if (!Number.isSafeInteger(pid) || pid <= 1) return null;
  const info: { pid: number; startTime: string; token?: string } = { pid, startTime: m[2] ?? '' };
  if (m[3] !== undefined && TOKEN.test(m[3])) info.token = m[3];
  return info;
}

/** Exit status text from the .exit file; null when it is not a number (written but unreadable). */
export function parseExitFile(text: string): number | null {
  const m = /^\s*(\d{1,3})\s*$/.exec(text);
  return m ? Number(m[1]) : null;
}

export function isAbsolutePath(path: string): boolean {
  return path.startsWith('/');
}

/** A stored record, checked field by field: a corrupt file must not become a pid to signal. */
export function parseProcRecord(text: string): ProcRecord {
  const raw = JSON.parse(text) as Record<string, unknown>;
  const str = (key: string): string => {
    const v = raw[key];
    if (typeof v !== 'string') throw new Error(`process record: ${key} is not a string`);
    return v;
  };
  const pidNum = (key: string): number => {
    const v = raw[key];
    // pid 0 and 1 would turn a group signal into "my own group" or "everything".
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 1)
      throw new Error(`process record: ${key} is not a pid`);
    return v;
  };
  const argv = raw.argv;
  if (!Array.isArray(argv) || !argv.every((a) => typeof a === 'string'))
    throw new Error('process record: argv is not a string list');
  const record: ProcRecord = {
    launchId: str('launchId'),
    pid: pidNum('pid'),
    pgid: pidNum('pgid'),
    startTime: str('startTime'),
    argvHash: str('argvHash'),
    argv: argv as string[],
    logPath: str('logPath'),
    exitPath: str('exitPath'),
    startedAt: str('startedAt'),
    host: str('host'),
  };
  if (raw.token !== undefined) {
    if (typeof raw.token !== 'string' || !TOKEN.test(raw.token))
      throw new Error('process record: token is not a launch token');
    record.token = raw.token;
  }
  assertLaunchId(record.launchId);
  return record;
}

export function renderProcRecord(record: ProcRecord): string {
  return `${JSON.stringify(record, null, 2)}\n`;
}
