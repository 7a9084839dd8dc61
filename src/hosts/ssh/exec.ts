/**
 * Host.exec over SSH, exactly once even when the connection drops mid-command. Each call
 * gets a directory <workdir>/.aerie/exec/<id> on the host; the command runs in its own
 * process group (setsid) with its output in files there, and the exit status is written
 * atomically when it ends. The channel normally brings status and output back at once;
 * after a drop, aerie reconnects and reads them from the files. A `run` directory is the
 * claim: the script takes it before running the command, and recovery takes it when the
 * script never started — so whichever side wins, the command runs at most once.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ExecOptions, ExecResult, ProcRecord } from '../host.js';
import { ExecAbortedError, ExecTimeoutError, shQuote, DEFAULT_OUTPUT_CAP } from '../util/index.js';
import type { GroupOps } from '../protocol/index.js';
import { killGroupWith, parsePidFile } from '../protocol/index.js';
import type { ShellFiles } from './files.js';
import { ConnectionLostError, type RunResult, type SshLink } from './link.js';
import { CAT_IF_PRESENT, envWords, parseCatIfPresent, remoteCommand } from './script.js';

/** Runs as the leader of the command's new session: records "<pid> <starttime>", sets env and cwd, execs argv. */
const INNER = [
  'd=$1; cwd=$2; n=$3; shift 3',
  'set -f',
  'read -r s < /proc/$$/stat; s=${s##*) }',
  'aerie_f22() { shift 19; printf %s "$1"; }',
  `printf '%s %s\\n' "$$" "$(aerie_f22 $s)" > "$d/pid.tmp" && mv -f -- "$d/pid.tmp" "$d/pid" || exit 125`,
  'unset -f aerie_f22',
  'while [ "$n" -gt 0 ]; do export "$1"; shift; n=$((n - 1)); done',
  `if [ -n "$cwd" ]; then cd -- "$cwd" 2>/dev/null || { printf 'aerie-exec-nocwd\\n' >&2; exit 125; }; fi`,
  `command -v -- "$1" >/dev/null 2>&1 || { printf '%s: command not found\\n' "$1" >&2; exit 127; }`,
  'exec "$@"',
].join('\n');

/** $1 the call's directory, then INNER's arguments. */
function outerScript(cap: number): string {
  return [
    'd=$1',
    `mkdir -p -- "$d" || { printf 'aerie-exec-setup: cannot create %s\\n' "$d" >&2; exit 125; }`,
    `mkdir -- "$d/run" 2>/dev/null || { printf 'aerie-exec-claimed\\n' >&2; exit 125; }`,
    'if [ -e "$d/in" ]; then i=$d/in; else i=/dev/null; fi',
    `setsid /bin/sh -c ${shQuote(INNER)} sh "$@" < "$i" > "$d/out" 2> "$d/err"`,
    'c=$?',
    `printf '%s\\n' "$c" > "$d/exit.tmp" && mv -f -- "$d/exit.tmp" "$d/exit"`,
    `tail -c ${cap} -- "$d/out"; tail -c ${cap} -- "$d/err" >&2`,
    'exit "$c"',
  ].join('\n');
}

/** After a drop: done, running, or stolen (the script never claimed the call, and now never will). */
const RECOVER = [
  'd=$1',
  '[ -e "$d/exit" ] && { echo done; exit 0; }',
  '[ -e "$d/stolen" ] && { echo stolen; exit 0; }',
  '[ -d "$d/run" ] && { echo running; exit 0; }',
  'mkdir -p -- "$d" && mkdir -- "$d/run" 2>/dev/null && : > "$d/stolen" && { echo stolen; exit 0; }',
  'echo running',
].join('\n');

/** "<code> <stdout bytes>\n", the stdout tail, then the stderr tail. */
const FETCH = [
  'd=$1; cap=$2',
  'c=$(cat -- "$d/exit") || exit 1',
  'o=$(stat -c %s -- "$d/out") || exit 1; [ "$o" -gt "$cap" ] && o=$cap',
  `printf '%s %s\\n' "$c" "$o"`,
  'tail -c "$cap" -- "$d/out"; tail -c "$cap" -- "$d/err"',
].join('\n');

const UPLOAD_STDIN = 'mkdir -p -- "$1" && umask 077 && cat > "$1/in.tmp" && mv -f -- "$1/in.tmp" "$1/in"';
const CLEAN = 'rm -rf -- "$@"';

export function parseFetch(out: Buffer): { code: number; stdout: Buffer; stderr: Buffer } {
  const nl = out.indexOf(0x0a);
  const m = /^(\d+) (\d+)$/.exec(out.subarray(0, nl).toString('latin1'));
  if (nl < 0 || !m) throw new Error('unexpected exec record on the host');
  const n = Number(m[2]);
  return { code: Number(m[1]), stdout: out.subarray(nl + 1, nl + 1 + n), stderr: out.subarray(nl + 1 + n) };
}

export interface DurableExecDeps {
  link: SshLink;
  files: ShellFiles;
  hostName: string;
  workdir: string;
  execPrefix: readonly string[];
  groupOps: GroupOps;
}

export class DurableExec {
  private readonly garbage: string[] = [];
  private sweep: NodeJS.Timeout | null = null;

  constructor(private readonly deps: DurableExecDeps) {}

  private command(script: string, args: (string | number)[]): string {
    return remoteCommand(script, args, this.deps.execPrefix);
  }

  async exec(argv: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
    if (argv.length === 0) throw new Error('exec: empty argv');
    if (opts.signal?.aborted) throw new ExecAbortedError(argv, '', '');
    for (;;) {
      const dir = `${this.deps.workdir}/.aerie/exec/${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
      if (opts.stdin !== undefined && opts.stdin !== '') {
        const up = await this.deps.files.query('upload stdin', UPLOAD_STDIN, [dir], opts.stdin);
        if (up.code !== 0)
          throw new Error(
            `exec ${argv[0]} on ${this.deps.hostName}: cannot stage stdin in ${dir}: ${up.stderr.trim()}`,
          );
      }
      try {
        const r = await this.once(dir, argv, opts);
        if (r !== 'stolen') return r;
      } finally {
        this.discard(dir);
      }
    }
  }

  private async once(dir: string, argv: readonly string[], opts: ExecOptions): Promise<ExecResult | 'stolen'> {
    let stopping: 'timeout' | 'abort' | null = null;
    let stopped: Promise<void> = Promise.resolve();
    const stop = (why: 'timeout' | 'abort') => {
      if (stopping) return;
      stopping = why;
      stopped = this.stopCommand(dir).catch(() => undefined);
    };
    const onAbort = () => stop('abort');
    const timer = opts.timeoutMs && opts.timeoutMs > 0 ? setTimeout(() => stop('timeout'), opts.timeoutMs) : null;
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const args = [dir, opts.cwd ?? '', envWords(opts.env).length, ...envWords(opts.env), ...argv];
      let done: { code: number | null; signal: string | null; stdout: Buffer; stderr: string } | 'lost';
      try {
        const conn = await this.deps.link.retrying('connect', async (c) => c);
        done = await conn.run(this.command(outerScript(DEFAULT_OUTPUT_CAP), args));
      } catch (err) {
        if (!(err instanceof ConnectionLostError)) throw err;
        done = 'lost';
      }
      if (done === 'lost') {
        const recovered = await this.recover(dir);
        if (recovered === 'stolen') {
          if (stopping) throw this.stopError(stopping, argv, opts, '', '');
          return 'stolen';
        }
        done = recovered;
      }
      this.checkSetup(done, argv, opts);
      await stopped;
      const stdout = done.stdout.toString('utf8');
      if (stopping) throw this.stopError(stopping, argv, opts, stdout, done.stderr);
      return { code: done.code, signal: done.signal, stdout, stderr: done.stderr };
    } finally {
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  private stopError(
    why: 'timeout' | 'abort',
    argv: readonly string[],
    opts: ExecOptions,
    stdout: string,
    stderr: string,
  ): Error {
    return why === 'timeout'
      ? new ExecTimeoutError(argv, opts.timeoutMs ?? 0, stdout, stderr)
      : new ExecAbortedError(argv, stdout, stderr);
  }

  /** aerie's own failures (not the command's) are errors, as LocalHost's spawn failures are. */
  private checkSetup(r: { code: number | null; stderr: string }, argv: readonly string[], opts: ExecOptions): void {
    if (r.code !== 125) return;
    if (r.stderr === 'aerie-exec-nocwd\n')
      throw new Error(`exec ${argv[0]}: working directory does not exist: ${opts.cwd}`);
    if (/^aerie-exec-(setup|claimed)/.test(r.stderr))
      throw new Error(`exec ${argv[0]} on ${this.deps.hostName}: ${r.stderr.trim()}`);
  }

  /** Wait (reconnecting as needed) until the command has ended, then read its status and output. */
  private async recover(dir: string): Promise<RunResult | 'stolen'> {
    let pause = 100;
    for (;;) {
      const state = (await this.deps.files.query('exec recovery', RECOVER, [dir])).stdout.toString('utf8').trim();
      if (state === 'stolen') return 'stolen';
      if (state === 'done') {
        const r = await this.deps.files.query('exec result', FETCH, [dir, DEFAULT_OUTPUT_CAP]);
        if (r.code !== 0)
          throw new Error(`exec on ${this.deps.hostName}: cannot read the result in ${dir}: ${r.stderr.trim()}`);
        const f = parseFetch(r.stdout);
        return { code: f.code, signal: null, stdout: f.stdout, stderr: f.stderr.toString('utf8') };
      }
      await sleep(pause);
      pause = Math.min(pause * 2, 1000);
    }
  }

  /** Timeout or cancellation: stop the command's own process group (recorded in its pid file), nothing else. */
  private async stopCommand(dir: string): Promise<void> {
    for (let i = 0; i < 100; i++) {
      const pid = parseCatIfPresent((await this.deps.files.query('exec pid', CAT_IF_PRESENT, [`${dir}/pid`])).stdout);
      const info = pid === null ? null : parsePidFile(pid.toString('utf8'));
      if (info && info.startTime !== '') {
        const record: ProcRecord = {
          launchId: 'exec',
          pid: info.pid,
          pgid: info.pid,
          startTime: info.startTime,
          argvHash: '',
          argv: [],
          logPath: `${dir}/out`,
          exitPath: `${dir}/exit`,
          startedAt: '',
          host: this.deps.hostName,
        };
        await killGroupWith(this.deps.groupOps, record, { graceMs: 2_000, pollMs: 100 });
        return;
      }
      const exited = parseCatIfPresent(
        (await this.deps.files.query('exec status', CAT_IF_PRESENT, [`${dir}/exit`])).stdout,
      );
      if (exited !== null) return;
      await sleep(100);
    }
  }

  /** Finished call directories are removed in batches, off the caller's path. */
  private discard(dir: string): void {
    this.garbage.push(dir);
    this.sweep ??= setTimeout(() => void this.flush(), 1_000).unref();
  }

  async flush(): Promise<void> {
    if (this.sweep) clearTimeout(this.sweep);
    this.sweep = null;
    const dirs = this.garbage.splice(0);
    if (dirs.length === 0) return;
    await this.deps.files.query('clean exec dirs', CLEAN, dirs).catch(() => undefined);
  }
}
