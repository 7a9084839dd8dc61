/**
 * LocalHost: the Host interface on the worker's own machine. The process protocol
 * (wrapper script, record layout, identity and group decisions) lives in pure modules
 * shared with SshHost; this class only supplies local file, /proc and signal access.
 */
import { spawn } from 'node:child_process';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  ExecOptions,
  ExecResult,
  FileStat,
  GpuInventory,
  Host,
  KillResult,
  ProcRecord,
  ProcStatus,
  SpawnOptions,
  SpawnResult,
} from '../host.js';
import { execLocal } from './exec.js';
import { appendFile, freeBytes, listDir, removePath, renamePath, statPath, tailFrom, writeFileAtomic } from './fs.js';
import {
  pidOfSocketInode,
  readCmdline,
  readProcStat,
  scanLaunchProcs,
  scanProcStats,
  signalProcessIfSame,
} from './proc.js';
import {
  renderLaunchScript,
  wrapperArgv,
  killGroupWith,
  type GroupSignal,
  launchView,
  liveRecordedGroups,
  remnantStatus,
  statusFrom,
  argvHash,
  isAbsolutePath,
  launchIdOfRecordFile,
  launchPaths,
  newLaunchToken,
  parsePidFile,
  parseProcRecord,
  procsDir,
  renderProcRecord,
  type LaunchPaths,
  sharedInFlight,
} from '../protocol/index.js';
import { listenersOnPort, parseProcNetTcp } from '../util/index.js';
import { gpuInventoryFrom, nvidiaSmiQueries } from '../gpu.js';

export interface LocalHostOptions {
  name: string;
  workdir: string;
  /** argv of nvidia-smi on this host; default ['nvidia-smi']. */
  nvidiaSmi?: string[];
}

/** How long a fresh wrapper may take to write its pid file before the launch counts as failed. */
const PID_FILE_WAIT_MS = 15_000;

async function readTextOrNull(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

function signalLocalGroup(pgid: number, signal: GroupSignal): Promise<boolean> {
  try {
    process.kill(-pgid, `SIG${signal}`);
    return Promise.resolve(true);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return Promise.resolve(false);
    return Promise.reject(err);
  }
}

export class LocalHost implements Host {
  readonly name: string;
  readonly workdir: string;
  private readonly nvidiaSmi: string[] | undefined;
  /** Launches under way in this process, so two concurrent calls with one launchId start one process. */
  private readonly launching = new Map<string, Promise<SpawnResult>>();

  constructor(opts: LocalHostOptions) {
    if (!isAbsolutePath(opts.workdir))
      throw new Error(`host ${opts.name}: workdir must be an absolute path: ${opts.workdir}`);
    this.name = opts.name;
    this.workdir = opts.workdir.replace(/(.)\/+$/, '$1');
    this.nvidiaSmi = opts.nvidiaSmi;
  }

  exec(argv: string[], opts?: ExecOptions): Promise<ExecResult> {
    return execLocal(argv, opts);
  }

  // ---- processes -------------------------------------------------------------------

  async spawnDetached(launchId: string, argv: string[], opts: SpawnOptions): Promise<SpawnResult> {
    const paths = launchPaths(this.workdir, launchId);
    const { value, shared } = await sharedInFlight(this.launching, launchId, () =>
      this.launchOnce(launchId, argv, opts, paths),
    );
    return shared ? { ...value, reattached: true } : value;
  }

  private async launchOnce(
    launchId: string,
    argv: string[],
    opts: SpawnOptions,
    paths: LaunchPaths,
  ): Promise<SpawnResult> {
    const existing = await this.findLaunch(launchId);
    if (existing) return { record: existing, reattached: true };

    // A pid file without a record: the wrapper started but whoever launched it died before
    // writing the record. Adopt that process instead of starting a second one.
    const pidText = await readTextOrNull(paths.pid);
    const adopted = pidText === null ? null : parsePidFile(pidText);
    if (adopted) {
      const startedAt = (await statPath(paths.pid))?.mtimeMs ?? Date.now();
      const record = await this.recordFor(launchId, argv, opts, paths, adopted, new Date(startedAt).toISOString());
      await writeFileAtomic(paths.record, renderProcRecord(record));
      return { record, reattached: true };
    }

    const token = newLaunchToken(launchId);
    const script = renderLaunchScript({
      launchId,
      argv,
      env: opts.env,
      cwd: opts.cwd,
      logPath: opts.logPath,
      paths,
      token,
    });
    await mkdir(paths.dir, { recursive: true });
    await Promise.all([removePath(paths.exit), removePath(`${paths.exit}.tmp`), removePath(`${paths.pid}.tmp`)]);
    await writeFileAtomic(paths.script, script, 0o600);

    const startedAt = new Date().toISOString();
    const pid = await this.startWrapper(paths);
    const record = await this.recordFor(launchId, argv, opts, paths, { ...pid, token }, startedAt);
    await writeFileAtomic(paths.record, renderProcRecord(record));
    return { record, reattached: false };
  }

  /** Start the wrapper in a new session and wait for the pid file it writes first. */
  private async startWrapper(paths: LaunchPaths): Promise<{ pid: number; startTime: string; token?: string }> {
    const [file, ...args] = wrapperArgv(paths);
    const child = spawn(file, args, { detached: true, stdio: 'ignore', cwd: '/' });
    let exited: string | null = null;
    const spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    child.once('exit', (code, signal) => {
      exited = signal ?? String(code);
    });
    await spawned;
    // The wrapper outlives us by design; do not keep the worker's event loop alive for it.
    child.unref();

    const deadline = Date.now() + PID_FILE_WAIT_MS;
    for (;;) {
      const text = await readTextOrNull(paths.pid);
      const info = text === null ? null : parsePidFile(text);
      if (info) return info;
      if (exited !== null)
        throw new Error(`launch wrapper ${paths.script} exited (${exited}) before writing ${paths.pid}`);
      if (Date.now() > deadline)
        throw new Error(`launch wrapper ${paths.script} wrote no pid file within ${PID_FILE_WAIT_MS} ms`);
      await sleep(10);
    }
  }

  private async recordFor(
    launchId: string,
    argv: string[],
    opts: SpawnOptions,
    paths: LaunchPaths,
    info: { pid: number; startTime: string; token?: string },
    startedAt: string,
  ): Promise<ProcRecord> {
    // The wrapper reads its own start time; /proc fills in only if it could not.
    let startTime = info.startTime;
    if (startTime === '') startTime = (await readProcStat(info.pid))?.startTime ?? '';
    return {
      launchId,
      pid: info.pid,
      pgid: info.pid, // the wrapper leads its own session, so its group id is its pid
      startTime,
      argvHash: argvHash(argv),
      argv: [...argv],
      logPath: opts.logPath,
      exitPath: paths.exit,
      startedAt,
      host: this.name,
      // An adopted wrapper's token comes from its pid file; older wrappers wrote none.
      ...(info.token !== undefined ? { token: info.token } : {}),
    };
  }

  async findLaunch(launchId: string): Promise<ProcRecord | null> {
    const text = await readTextOrNull(launchPaths(this.workdir, launchId).record);
    return text === null ? null : parseProcRecord(text);
  }

  async listLaunches(): Promise<ProcRecord[]> {
    const dir = procsDir(this.workdir);
    let names: string[];
    try {
      names = (await readdir(dir)).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const records: ProcRecord[] = [];
    for (const name of names) {
      if (launchIdOfRecordFile(name) === null) continue;
      const text = await readTextOrNull(`${dir}/${name}`);
      if (text === null) continue;
      try {
        records.push(parseProcRecord(text));
      } catch {
        // Not a record aerie wrote; it names no process we may touch.
      }
    }
    return records;
  }

  async procStatus(record: ProcRecord): Promise<ProcStatus> {
    const [leader, exitText] = await Promise.all([readProcStat(record.pid), readTextOrNull(record.exitPath)]);
    const status = statusFrom(leader, exitText, record);
    // A marked launch whose leader ended may still have processes (torchrun's workers).
    if (status.state === 'alive' || record.token === undefined) return status;
    return remnantStatus(status, launchView(await scanLaunchProcs(record.token), record));
  }

  killGroup(record: ProcRecord, opts: { graceMs?: number } = {}): Promise<KillResult> {
    return killGroupWith(
      {
        scan: scanProcStats,
        scanLaunch: scanLaunchProcs,
        signalGroup: signalLocalGroup,
        signalProcess: signalProcessIfSame,
        sleep: (ms) => sleep(ms),
        now: () => Date.now(),
      },
      record,
      { graceMs: opts.graceMs ?? 10_000, pollMs: 100 },
    );
  }

  // ---- files -----------------------------------------------------------------------

  readFile(path: string): Promise<Buffer> {
    return readFile(path);
  }
  writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
    return writeFileAtomic(path, data);
  }
  appendFile(path: string, data: string | Buffer): Promise<void> {
    return appendFile(path, data);
  }
  stat(path: string): Promise<FileStat | null> {
    return statPath(path);
  }
  list(dir: string): Promise<FileStat[]> {
    return listDir(dir);
  }
  async mkdirp(path: string): Promise<void> {
    await mkdir(path, { recursive: true });
  }
  rename(from: string, to: string): Promise<void> {
    return renamePath(from, to);
  }
  remove(path: string): Promise<void> {
    return removePath(path);
  }
  tailFrom(path: string, offset: number, maxBytes?: number): Promise<{ data: string; offset: number }> {
    return tailFrom(path, offset, maxBytes);
  }
  freeBytes(path: string): Promise<number> {
    return freeBytes(path);
  }

  // ---- network and GPUs ------------------------------------------------------------

  async httpBase(port: number): Promise<string> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`not a TCP port: ${port}`);
    return `http://127.0.0.1:${port}`;
  }

  async portHolder(port: number): Promise<{ listening: boolean; pid?: number; command?: string }> {
    const [v4, v6] = await Promise.all([readTextOrNull('/proc/net/tcp'), readTextOrNull('/proc/net/tcp6')]);
    const sockets = [...parseProcNetTcp(v4 ?? '', 4), ...parseProcNetTcp(v6 ?? '', 6)];
    const listeners = listenersOnPort(sockets, port);
    if (listeners.length === 0) return { listening: false };
    for (const socket of listeners) {
      if (socket.inode === '0') continue;
      const pid = await pidOfSocketInode(socket.inode);
      if (pid !== undefined) return { listening: true, pid, command: await readCmdline(pid) };
    }
    return { listening: true };
  }

  async gpuInventory(): Promise<GpuInventory> {
    const run = (argv: string[]): Promise<ExecResult> =>
      this.exec(argv, { timeoutMs: 30_000 }).catch((err: Error) => ({
        code: 1,
        signal: null,
        stdout: '',
        stderr: err.message,
      }));
    const q = nvidiaSmiQueries(this.nvidiaSmi);
    const gpusRun = await run(q.gpus);
    const appsRun = gpusRun.code === 0 ? await run(q.apps) : null;
    let isOurs: (pid: number) => boolean = () => false;
    if (appsRun && appsRun.code === 0 && appsRun.stdout.trim() !== '') {
      const [stats, records] = await Promise.all([scanProcStats(), this.listLaunches()]);
      const groups = liveRecordedGroups(stats, records);
      const pgrpOf = new Map(stats.map((s) => [s.pid, s.pgrp]));
      isOurs = (pid) => groups.has(pgrpOf.get(pid) ?? -1);
    }
    return gpuInventoryFrom(this.name, gpusRun, appsRun, isOurs);
  }

  async close(): Promise<void> {
    // Nothing to release: no connections, and launched processes outlive the host object by design.
  }
}
