/**
 * SshHost: the Host interface on a remote machine over one SSH connection per worker
 * (ssh2). The process protocol is LocalHost's — the same wrapper script started under
 * setsid, the same records, identity and group decisions (hosts/protocol/launch-script.ts, hosts/protocol/records.ts,
 * hosts/protocol/proc-identity.ts, hosts/protocol/kill-group.ts) — with /proc read and groups signalled through fixed
 * scripts on the host. With an exec prefix every command, file operation included, runs
 * through the prefix (inside the container). Where it connects is read by endpoint.ts; the
 * records it writes and reads back are made by launch-record.ts.
 */
import { randomBytes } from 'node:crypto';
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
import { gpuInventoryFrom, nvidiaSmiQueries } from '../gpu.js';
import {
  killGroupWith,
  type GroupOps,
  type GroupSignal,
  EXIT_NOT_THAT_PROCESS,
  PROC_LAUNCH_SCAN,
  PROC_STAT_SCAN,
  PROCESS_SIGNAL,
  renderDetachedLaunch,
  renderGroupSignal,
  renderLaunchScript,
  launchView,
  liveRecordedGroups,
  parseLaunchScan,
  remnantStatus,
  statusFrom,
  type LaunchScan,
  parseProcStat,
  parseProcStats,
  type ProcStat,
  assertLaunchToken,
  isAbsolutePath,
  launchPaths,
  newLaunchToken,
  parsePidFile,
  parseProcRecord,
  procsDir,
  renderProcRecord,
  type LaunchPaths,
  sharedInFlight,
} from '../protocol/index.js';
import { listenersOnPort, parseProcNetTcpScan, PROC_NET_TCP_SCAN } from '../util/index.js';
import { loadEndpoint, type SshHostTarget } from './endpoint.js';
import { DurableExec } from './exec.js';
import { SftpFiles, ShellFiles } from './files.js';
import { PortForwards } from './forward.js';
import { DEFAULT_LINK_TUNING, ConnectionLostError, SshLink, type LinkTuning } from './link.js';
import { launchRecord, recordsFrom } from './launch-record.js';
import { describeEndpoint, type SshEndpoint } from './options.js';
import {
  PROC_STATUS,
  READ_RECORDS,
  SOCKET_OWNER,
  remoteCommand,
  parseProcStatus,
  parseRecords,
  parseSocketOwner,
} from './script.js';

export { loadEndpoint } from './endpoint.js';

export interface SshHostOptions {
  name: string;
  workdir: string;
  ssh: SshHostTarget;
  execPrefix?: string[];
  /** Where the SSH host reaches the model server's port; default 127.0.0.1. */
  httpAddress?: string;
  /** argv of nvidia-smi on the host (through the exec prefix); default ['nvidia-smi']. */
  nvidiaSmi?: string[];
  /** Overrides for keepalive, retry budget and session limits (tests shorten them). */
  tuning?: Partial<LinkTuning>;
}

const PID_FILE_WAIT_MS = 15_000;

export class SshHost implements Host {
  readonly name: string;
  readonly workdir: string;
  private readonly nvidiaSmi: string[] | undefined;
  readonly link: SshLink;
  private readonly files: ShellFiles;
  private readonly shell: ShellFiles;
  private readonly durable: DurableExec;
  private readonly forwards: PortForwards;
  private readonly execPrefix: string[];
  private readonly launching = new Map<string, Promise<SpawnResult>>();
  private endpoint: Promise<SshEndpoint> | null = null;
  private readonly sshOptions: SshHostOptions['ssh'];

  constructor(opts: SshHostOptions) {
    if (!isAbsolutePath(opts.workdir))
      throw new Error(`host ${opts.name}: workdir must be an absolute path: ${opts.workdir}`);
    this.name = opts.name;
    this.workdir = opts.workdir.replace(/(.)\/+$/, '$1');
    this.execPrefix = [...(opts.execPrefix ?? [])];
    const tuning: LinkTuning = {
      ...DEFAULT_LINK_TUNING,
      strict: opts.ssh['strict-host-key-checking'] ?? 'yes',
      ...opts.tuning,
    };
    this.sshOptions = opts.ssh;
    this.link = new SshLink(opts.name, () => this.resolveEndpoint(), tuning);
    this.shell = new ShellFiles(this.link, this.name, this.execPrefix);
    // Inside a container the SSH server's SFTP sees the hypervisor's files, not the container's.
    this.files = this.execPrefix.length > 0 ? this.shell : new SftpFiles(this.link, this.name, this.execPrefix);
    this.durable = new DurableExec({
      link: this.link,
      files: this.shell,
      hostName: this.name,
      workdir: this.workdir,
      execPrefix: this.execPrefix,
      groupOps: this.groupOps(),
    });
    this.forwards = new PortForwards(this.link, opts.httpAddress);
    this.nvidiaSmi = opts.nvidiaSmi;
  }

  /** The resolved endpoint (ssh config read once per host object). */
  resolveEndpoint(): Promise<SshEndpoint> {
    this.endpoint ??= loadEndpoint(this.sshOptions).catch((err: unknown) => {
      this.endpoint = null;
      throw err;
    });
    return this.endpoint;
  }

  /** user@host:port (via jumps), for messages. */
  async describe(): Promise<string> {
    return describeEndpoint(await this.resolveEndpoint());
  }

  exec(argv: string[], opts?: ExecOptions): Promise<ExecResult> {
    return this.durable.exec(argv, opts);
  }

  // ---- processes -------------------------------------------------------------------

  private groupOps(): GroupOps {
    return {
      scan: () => this.scanProcStats(),
      scanLaunch: (token) => this.scanLaunch(token),
      signalGroup: (pgid, signal) => this.signalGroup(pgid, signal),
      signalProcess: (pid, startTime, signal) => this.signalProcess(pid, startTime, signal),
      sleep: (ms) => sleep(ms),
      now: () => Date.now(),
    };
  }

  private async scanProcStats(): Promise<ProcStat[]> {
    const r = await this.shell.query('scan /proc', PROC_STAT_SCAN, []);
    return parseProcStats(r.stdout.toString('utf8'));
  }

  /** One exec: every stat line and the processes marked with token (hosts/protocol/launch-script.ts). */
  private async scanLaunch(token: string): Promise<LaunchScan> {
    assertLaunchToken(token);
    const nonce = randomBytes(8).toString('hex');
    const r = await this.shell.query('scan /proc for a launch', PROC_LAUNCH_SCAN, [token, nonce]);
    return parseLaunchScan(r.stdout.toString('utf8'), nonce);
  }

  private async signalProcess(pid: number, startTime: string, signal: GroupSignal): Promise<boolean> {
    if (!Number.isSafeInteger(pid) || pid <= 1) throw new Error(`refusing to signal process ${pid}`);
    if (!/^\d+$/.test(startTime)) return false;
    const r = await this.shell.query(`signal process ${pid}`, PROCESS_SIGNAL, [pid, startTime, signal]);
    if (r.code === 0) return true;
    if (r.code === EXIT_NOT_THAT_PROCESS || /no such process/i.test(r.stderr)) return false;
    throw new Error(`kill -s ${signal} ${pid} on ${this.name} failed (exit ${r.code}): ${r.stderr.trim()}`);
  }

  private async signalGroup(pgid: number, signal: GroupSignal): Promise<boolean> {
    const r = await this.shell.query(`signal group ${pgid}`, renderGroupSignal(pgid, signal), []);
    if (r.code === 0) return true;
    if (/no such process/i.test(r.stderr)) return false;
    throw new Error(`kill -s ${signal} -- -${pgid} on ${this.name} failed (exit ${r.code}): ${r.stderr.trim()}`);
  }

  private async readIfPresent(path: string): Promise<string | null> {
    const out = await this.files.readIfPresent(path);
    return out === null ? null : out.toString('utf8');
  }

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

    // A pid file without a record: the wrapper started, but whoever launched it died before
    // writing the record (or the link dropped). Adopt that process instead of starting another.
    const pidText = await this.readIfPresent(paths.pid);
    const adopted = pidText === null ? null : parsePidFile(pidText);
    if (adopted) {
      const record = launchRecord(this.name, launchId, argv, opts, paths, adopted, new Date().toISOString());
      await this.files.writeFileAtomic(paths.record, renderProcRecord(record));
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
    await this.shell.mkdirp(paths.dir);
    await Promise.all([paths.exit, `${paths.exit}.tmp`, `${paths.pid}.tmp`].map((p) => this.shell.remove(p)));
    // The wrapper holds the command's environment (tokens): mode 0600, never on a command line.
    await this.files.writeFileAtomic(paths.script, script, { private: true });

    const startedAt = new Date().toISOString();
    const info = await this.startWrapper(paths);
    const record = launchRecord(this.name, launchId, argv, opts, paths, { ...info, token }, startedAt);
    await this.files.writeFileAtomic(paths.record, renderProcRecord(record));
    return { record, reattached: false };
  }

  /**
   * Start the wrapper detached (setsid, backgrounded: the channel returns at once) and wait
   * for its pid file. The start itself is not retried: if the link drops under it, the pid
   * file says whether it ran.
   */
  private async startWrapper(paths: LaunchPaths): Promise<{ pid: number; startTime: string; token?: string }> {
    try {
      const conn = await this.link.retrying('connect', async (c) => c);
      const r = await conn.run(remoteCommand(renderDetachedLaunch(paths), [], this.execPrefix));
      if (r.code !== 0)
        throw new Error(`starting the launch wrapper on ${this.name} failed (exit ${r.code}): ${r.stderr.trim()}`);
    } catch (err) {
      if (!(err instanceof ConnectionLostError)) throw err;
    }
    const deadline = Date.now() + PID_FILE_WAIT_MS;
    for (;;) {
      const text = await this.readIfPresent(paths.pid);
      const info = text === null ? null : parsePidFile(text);
      if (info) return info;
      if (Date.now() > deadline)
        throw new Error(
          `launch wrapper ${paths.script} on ${this.name} wrote no pid file within ${PID_FILE_WAIT_MS} ms`,
        );
      await sleep(50);
    }
  }

  async findLaunch(launchId: string): Promise<ProcRecord | null> {
    const text = await this.readIfPresent(launchPaths(this.workdir, launchId).record);
    return text === null ? null : parseProcRecord(text);
  }

  async listLaunches(): Promise<ProcRecord[]> {
    const r = await this.shell.query('read launch records', READ_RECORDS, [procsDir(this.workdir)]);
    return recordsFrom(parseRecords(r.stdout));
  }

  async procStatus(record: ProcRecord): Promise<ProcStatus> {
    const status = await this.leaderStatus(record);
    // A marked launch whose leader ended may still have processes (torchrun's workers).
    if (status.state === 'alive' || record.token === undefined) return status;
    return remnantStatus(status, launchView(await this.scanLaunch(record.token), record));
  }

  private async leaderStatus(record: ProcRecord): Promise<ProcStatus> {
    if (this.files === this.shell) {
      const r = await this.shell.query(`status of ${record.launchId}`, PROC_STATUS, [record.pid, record.exitPath]);
      const { statLine, exitText } = parseProcStatus(r.stdout.toString('utf8'));
      return statusFrom(statLine === null ? null : parseProcStat(statLine), exitText, record);
    }
    // Over SFTP both reads are one round trip each instead of a process on the host (polled every few seconds).
    const [statLine, exitText] = await Promise.all([
      this.readIfPresent(`/proc/${record.pid}/stat`),
      this.readIfPresent(record.exitPath),
    ]);
    return statusFrom(statLine ? parseProcStat(statLine) : null, exitText, record);
  }

  killGroup(record: ProcRecord, opts: { graceMs?: number } = {}): Promise<KillResult> {
    return killGroupWith(this.groupOps(), record, { graceMs: opts.graceMs ?? 10_000, pollMs: 200 });
  }

  // ---- files -----------------------------------------------------------------------

  readFile(path: string): Promise<Buffer> {
    return this.files.readFile(path);
  }
  writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
    return this.files.writeFileAtomic(path, data);
  }
  appendFile(path: string, data: string | Buffer): Promise<void> {
    return this.files.appendFile(path, data);
  }
  stat(path: string): Promise<FileStat | null> {
    return this.files.stat(path);
  }
  list(dir: string): Promise<FileStat[]> {
    return this.files.list(dir);
  }
  mkdirp(path: string): Promise<void> {
    return this.shell.mkdirp(path);
  }
  rename(from: string, to: string): Promise<void> {
    return this.shell.rename(from, to);
  }
  remove(path: string): Promise<void> {
    return this.shell.remove(path);
  }
  tailFrom(path: string, offset: number, maxBytes?: number): Promise<{ data: string; offset: number }> {
    return this.files.tailFrom(path, offset, maxBytes);
  }
  freeBytes(path: string): Promise<number> {
    return this.shell.freeBytes(path);
  }

  // ---- network and GPUs ------------------------------------------------------------

  async httpBase(port: number): Promise<string> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`not a TCP port: ${port}`);
    return `http://127.0.0.1:${await this.forwards.localPort(port)}`;
  }

  async portHolder(port: number): Promise<{ listening: boolean; pid?: number; command?: string }> {
    const r = await this.shell.query('read /proc/net/tcp', PROC_NET_TCP_SCAN, []);
    const listeners = listenersOnPort(parseProcNetTcpScan(r.stdout.toString('utf8')), port);
    if (listeners.length === 0) return { listening: false };
    for (const socket of listeners) {
      if (socket.inode === '0') continue;
      const owner = parseSocketOwner(
        (await this.shell.query('find socket owner', SOCKET_OWNER, [socket.inode])).stdout.toString('utf8'),
      );
      if (owner) return { listening: true, ...owner };
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
      const [stats, records] = await Promise.all([this.scanProcStats(), this.listLaunches()]);
      const groups = liveRecordedGroups(stats, records);
      const pgrpOf = new Map(stats.map((s) => [s.pid, s.pgrp]));
      isOurs = (pid) => groups.has(pgrpOf.get(pid) ?? -1);
    }
    return gpuInventoryFrom(this.name, gpusRun, appsRun, isOurs);
  }

  async close(): Promise<void> {
    // Launched processes outlive the connection by design; only aerie's own bookkeeping ends.
    await Promise.race([this.durable.flush(), sleep(3_000)]);
    await this.forwards.close();
    await this.link.close();
  }
}
