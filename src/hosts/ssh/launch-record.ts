/** The launch records SshHost writes beside each wrapper and reads back (hosts/protocol/records.ts). */
import type { ProcRecord, SpawnOptions } from '../host.js';
import { argvHash, launchIdOfRecordFile, parseProcRecord, type LaunchPaths } from '../protocol/index.js';

/** The record of a wrapper that started (or was adopted from its pid file). */
export function launchRecord(
  host: string,
  launchId: string,
  argv: string[],
  opts: SpawnOptions,
  paths: LaunchPaths,
  info: { pid: number; startTime: string; token?: string },
  startedAt: string,
): ProcRecord {
  return {
    launchId,
    pid: info.pid,
    pgid: info.pid, // the wrapper leads its own session, so its group id is its pid
    startTime: info.startTime,
    argvHash: argvHash(argv),
    argv: [...argv],
    logPath: opts.logPath,
    exitPath: paths.exit,
    startedAt,
    host,
    // An adopted wrapper's token comes from its pid file; older wrappers wrote none.
    ...(info.token !== undefined ? { token: info.token } : {}),
  };
}

/** Every record among the files read from the procs folder, in path order; other files are skipped. */
export function recordsFrom(files: { path: string; text: string }[]): ProcRecord[] {
  const records: ProcRecord[] = [];
  for (const { path, text } of [...files].sort((a, b) => (a.path < b.path ? -1 : 1))) {
    if (launchIdOfRecordFile(path.slice(path.lastIndexOf('/') + 1)) === null) continue;
    try {
      records.push(parseProcRecord(text));
    } catch {
      // Not a record aerie wrote; it names no process we may touch.
    }
  }
  return records;
}
