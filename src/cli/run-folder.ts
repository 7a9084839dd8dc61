/**
 * The local run folder, `<state dir>/runs/<run>/`: the config a run started with, its result
 * and report copies, and the log of the worker `aerie run` ran in-process. Its own module so
 * run.ts and report.ts both use it without importing each other.
 */
import { isAbsolute, join, relative } from 'node:path';
import { stateDir } from '../temporal/dev-server.js';

export function localRunFolder(runId: string): string {
  return join(stateDir(), 'runs', runId);
}

/** Where the in-process worker's logs go (the SDK's and its Rust core's): the terminal is the stage table's. */
export function workerLogPath(runId: string): string {
  return join(localRunFolder(runId), 'worker.log');
}

/** A path as a user at this prompt would type it: relative when it lies under the current directory. */
export function shownPath(path: string, cwd = process.cwd()): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}
