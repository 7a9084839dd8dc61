/**
 * aerie's host-side Python (py/aerie_hs) run as a test needs it: `python -m aerie_hs.<module>` or
 * a script given with -c, with py/ on PYTHONPATH, to its end (test/support/processes.ts).
 */
import { join, resolve } from 'node:path';
import { run, runSync, type RunOptions, type RunResult } from './processes.js';

const ROOT = resolve(import.meta.dirname, '../..');
/** The folder holding the aerie_hs package. */
export const AERIE_PY = join(ROOT, 'py');

export interface PythonOptions extends RunOptions {
  /** The interpreter; default python3 on PATH. */
  python?: string;
  /** Folders put before py/ on PYTHONPATH (a stand-in package, say); `pythonPath: false` leaves PYTHONPATH alone. */
  extraPath?: string[];
  pythonPath?: false;
}

function withPath(opts: PythonOptions): RunOptions {
  if (opts.pythonPath === false) return opts;
  return { ...opts, env: { PYTHONPATH: [...(opts.extraPath ?? []), AERIE_PY].join(':'), ...opts.env } };
}

/** `python args` to its end, synchronously; never throws on a non-zero exit. */
export function pythonSync(args: string[], opts: PythonOptions = {}): RunResult {
  return runSync(opts.python ?? 'python3', args, withPath(opts));
}

/** `python args` to its end, asynchronously; never throws on a non-zero exit. */
export function python(args: string[], opts: PythonOptions = {}): Promise<RunResult> {
  return run(opts.python ?? 'python3', args, withPath(opts));
}

/** The stdout of `python -c src args`, which must exit 0 (else it throws with its stderr). */
export function pythonOut(src: string, args: string[] = [], opts: PythonOptions = {}): string {
  const r = pythonSync(['-c', src, ...args], opts);
  if (r.code !== 0) throw new Error(`python -c exited ${r.code ?? r.signal}:\n${r.stderr}`);
  return r.stdout;
}

/** As pythonOut, asynchronously. */
export async function pythonOutAsync(src: string, args: string[] = [], opts: PythonOptions = {}): Promise<string> {
  const r = await python(['-c', src, ...args], opts);
  if (r.code !== 0) throw new Error(`python -c exited ${r.code ?? r.signal}:\n${r.stderr}`);
  return r.stdout;
}

/** What `python -c src` prints as JSON, with py/ importable. */
export function pythonJson(src: string, opts: PythonOptions = {}): unknown {
  return JSON.parse(pythonOut(src, [], opts));
}
