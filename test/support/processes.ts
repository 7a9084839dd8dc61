/**
 * The child processes a test runs itself, in two kinds: a command run to its end whose exit code
 * and output the test reads (a CLI, a Python script), and a long-lived process (a fake server)
 * started in its own process group, recorded by its pgid and stopped by it after the file or test.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { afterAll, afterEach } from 'vitest';

export interface RunResult {
  /** The exit code; null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd?: string;
  /** Added over this process's environment; a key given as undefined is removed. */
  env?: Record<string, string | undefined>;
  /** Written to its stdin, which is then closed; without it stdin is /dev/null. */
  input?: string | Buffer;
  /** Its environment is exactly `env` (nothing inherited). */
  bareEnv?: boolean;
  timeoutMs?: number;
}

function envOf(opts: RunOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = opts.bareEnv ? {} : { ...process.env };
  for (const [k, v] of Object.entries(opts.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

/** Runs `cmd args` to its end, synchronously; never throws on a non-zero exit. */
export function runSync(cmd: string, args: string[], opts: RunOptions = {}): RunResult {
  const r = spawnSync(cmd, args, {
    cwd: opts.cwd,
    env: envOf(opts),
    input: opts.input,
    encoding: 'utf8',
    maxBuffer: 1 << 28,
    timeout: opts.timeoutMs,
  });
  if (r.error) throw r.error;
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** Runs `cmd args` to its end without blocking the event loop (a fake server in this process may answer it). */
export function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const stdin = opts.input === undefined ? 'ignore' : 'pipe';
    // Its own process group, so a timeout stops the command and anything it started.
    const child = spawn(cmd, args, { cwd: opts.cwd, env: envOf(opts), stdio: [stdin, 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = opts.timeoutMs ? setTimeout(() => signalGroup(child.pid!, 'SIGKILL'), opts.timeoutMs) : undefined;
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    if (child.stdin) {
      // A command that exits without reading all of its input is answered by its exit code, not by EPIPE.
      child.stdin.on('error', () => undefined);
      child.stdin.end(opts.input);
    }
  });
}

/** Signals a whole process group; one already gone is not an error. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

export interface ProcessGroups {
  /** Starts `cmd args` as the leader of its own process group, recorded by its pgid. */
  start(cmd: string, args: string[], opts?: SpawnOptions): ChildProcess;
  /** SIGKILLs every group started so far, by its recorded pgid, and waits for the leaders to exit. */
  stopAll(): Promise<void>;
}

/**
 * Long-lived processes of a test file (`each`: of each test): every one started through it is
 * SIGKILLed by its recorded pgid in afterAll (afterEach), whatever the test did.
 */
export function useProcessGroups(opts: { each?: boolean } = {}): ProcessGroups {
  const started: ChildProcess[] = [];
  const groups: ProcessGroups = {
    start(cmd, args, spawnOpts = {}) {
      const child = spawn(cmd, args, { stdio: 'ignore', ...spawnOpts, detached: true });
      started.push(child);
      return child;
    },
    async stopAll() {
      await Promise.all(
        started.splice(0).map(async (child) => {
          if (child.pid === undefined) return;
          const exited =
            child.exitCode !== null || child.signalCode !== null
              ? undefined
              : new Promise((r) => child.once('exit', r));
          signalGroup(child.pid, 'SIGKILL');
          await exited;
        }),
      );
    },
  };
  (opts.each ? afterEach : afterAll)(() => groups.stopAll());
  return groups;
}

/** As run, but a non-zero exit throws, naming the command and its stderr (for steps that must succeed). */
export async function runOk(cmd: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code ?? r.signal}:\n${r.stderr}`);
  return r;
}
