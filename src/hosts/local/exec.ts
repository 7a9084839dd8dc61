/**
 * exec on this machine: spawn without a shell (argv goes to the program as is), in its own
 * process group so a timeout or cancellation stops the command and everything it started.
 */
import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import type { ExecOptions, ExecResult } from '../host.js';
import { ExecAbortedError, ExecTimeoutError, DEFAULT_OUTPUT_CAP, TailBuffer } from '../util/index.js';

export interface LocalExecTuning {
  /** Bytes of stdout and of stderr kept (the last ones). */
  outputCap?: number;
  /** Between TERM and KILL when a timeout or cancellation stops the command. */
  killGraceMs?: number;
}

function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined || pgid <= 1) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone
  }
}

/** What a shell would answer for a program it cannot run, so LocalHost and SshHost agree. */
async function spawnFailure(argv: readonly string[], err: NodeJS.ErrnoException, cwd?: string): Promise<ExecResult> {
  if (
    cwd !== undefined &&
    !(await stat(cwd).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  ) {
    throw new Error(`exec ${argv[0]}: working directory does not exist: ${cwd}`);
  }
  if (err.code === 'ENOENT') return { code: 127, signal: null, stdout: '', stderr: `${argv[0]}: command not found\n` };
  if (err.code === 'EACCES') return { code: 126, signal: null, stdout: '', stderr: `${argv[0]}: permission denied\n` };
  throw err;
}

export function execLocal(
  argv: readonly string[],
  opts: ExecOptions = {},
  tuning: LocalExecTuning = {},
): Promise<ExecResult> {
  if (argv.length === 0) return Promise.reject(new Error('exec: empty argv'));
  const cap = tuning.outputCap ?? DEFAULT_OUTPUT_CAP;
  const killGraceMs = tuning.killGraceMs ?? 2_000;
  if (opts.signal?.aborted) return Promise.reject(new ExecAbortedError(argv, '', ''));

  return new Promise<ExecResult>((resolve, reject) => {
    const out = new TailBuffer(cap);
    const err = new TailBuffer(cap);
    let stopping: 'timeout' | 'abort' | null = null;
    const timers: NodeJS.Timeout[] = [];
    let settled = false;

    // detached → setsid(): the command leads its own group, which we can stop as a whole.
    const child = spawn(argv[0], argv.slice(1), {
      cwd: opts.cwd,
      env: { ...process.env, ...opts.env },
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });

    const finish = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      opts.signal?.removeEventListener('abort', onAbort);
      fn();
    };

    const stop = (why: 'timeout' | 'abort'): void => {
      if (stopping || settled) return;
      stopping = why;
      signalGroup(child.pid, 'SIGTERM');
      timers.push(
        setTimeout(() => {
          signalGroup(child.pid, 'SIGKILL');
          // A descendant that left our group may still hold the pipes; stop waiting for it.
          timers.push(
            setTimeout(() => {
              child.stdout?.destroy();
              child.stderr?.destroy();
            }, 1_000),
          );
        }, killGraceMs),
      );
    };
    const onAbort = (): void => stop('abort');

    child.stdout?.on('data', (c: Buffer) => out.push(c));
    child.stderr?.on('data', (c: Buffer) => err.push(c));
    // The command may exit without reading its stdin; that is not an exec failure.
    child.stdin?.on('error', () => {});
    child.stdin?.end(opts.stdin ?? '');

    child.on('error', (e: NodeJS.ErrnoException) => {
      // spawn failed (no such program, or no such cwd): there is no process to wait for.
      if (child.pid !== undefined) return;
      spawnFailure(argv, e, opts.cwd).then(
        (r) => finish(() => resolve(r)),
        (x: unknown) => finish(() => reject(x)),
      );
    });

    child.on('close', (code, signal) => {
      if (child.pid === undefined) return; // spawn failure: the 'error' handler answers
      finish(() => {
        if (stopping === 'timeout') reject(new ExecTimeoutError(argv, opts.timeoutMs ?? 0, out.text(), err.text()));
        else if (stopping === 'abort') reject(new ExecAbortedError(argv, out.text(), err.text()));
        else resolve({ code, signal, stdout: out.text(), stderr: err.text() });
      });
    });

    if (opts.timeoutMs !== undefined && opts.timeoutMs > 0)
      timers.push(setTimeout(() => stop('timeout'), opts.timeoutMs));
    opts.signal?.addEventListener('abort', onAbort, { once: true });
  });
}
