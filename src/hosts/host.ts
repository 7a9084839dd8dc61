/**
 * The Host interface: every file and process aerie touches on a GPU host goes through it.
 * Nothing above src/hosts may assume the host is the worker's machine or shares its
 * filesystem — LocalHost and SshHost must be interchangeable.
 */

export interface ExecOptions {
  env?: Record<string, string>;
  cwd?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Bytes written to the command's stdin. */
  stdin?: string;
}

export interface ExecResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** What aerie records for every long process it starts, atomically, before the launch returns. */
export interface ProcRecord {
  launchId: string;
  pid: number;
  pgid: number;
  /** Process start time in clock ticks since boot (/proc/<pid>/stat field 22): pid + startTime is identity. */
  startTime: string;
  /** sha256 of the JSON argv, so a re-attach can tell it found the same command. */
  argvHash: string;
  argv: string[];
  logPath: string;
  /** Where the launch wrapper writes the exit code when the process ends. */
  exitPath: string;
  /** ISO timestamp of the launch. */
  startedAt: string;
  host: string;
  /**
   * The value of AERIE_LAUNCH in the launch's environment, inherited by every descendant —
   * also by those that leave the launch's process group and session (torchrun's workers) —
   * so a /proc scan can find them. Absent in records written before launches were marked.
   */
  token?: string;
}

export type ProcStatus =
  | { state: 'alive' }
  | { state: 'exited'; code: number | null }
  | { state: 'gone' }
  /**
   * The leader (the wrapper) has ended, with `code` from its exit file (null when it left
   * none), but processes of the launch still run: `processes` in all, of which `escaped`
   * live outside the recorded process group (in a session of their own, as torchrun's
   * workers do). Only marked launches (ProcRecord.token) are ever reported so.
   */
  | { state: 'orphans'; code: number | null; processes: number; escaped: number };

export interface SpawnOptions {
  env?: Record<string, string>;
  cwd?: string;
  /** Combined stdout+stderr go here (absolute path on the host). */
  logPath: string;
}

export interface SpawnResult {
  record: ProcRecord;
  /** true when a live process with this launchId already existed and was re-attached. */
  reattached: boolean;
}

export interface KillResult {
  /** Signals actually sent, in order, e.g. ['TERM'] or ['TERM', 'KILL']. */
  signals: string[];
  /** true when no process of the group remains (nor, for a marked launch, any escaped process). */
  groupEmpty: boolean;
  /**
   * Present only when marked processes outside the recorded group were found: how many,
   * and how many of them were gone at the end.
   */
  escaped?: { found: number; stopped: number };
}

export interface FileStat {
  path: string;
  size: number;
  isDirectory: boolean;
  mtimeMs: number;
}

export interface GpuInfo {
  index: number;
  uuid: string;
  name: string;
  memoryUsedMiB: number;
  memoryTotalMiB: number;
}

export interface GpuProcess {
  pid: number;
  usedMemoryMiB: number;
  /** The GPU it runs on; null when nvidia-smi's uuid matched no GPU (counted as on every GPU). */
  gpuIndex: number | null;
  ours: boolean;
}

export interface GpuInventory {
  available: boolean;
  reason?: string;
  gpus: GpuInfo[];
  processes: GpuProcess[];
}

export interface Host {
  /** Name from the config (e.g. "local", "gpu-a"). */
  readonly name: string;
  /** Absolute path of aerie's work directory on the host. */
  readonly workdir: string;

  exec(argv: string[], opts?: ExecOptions): Promise<ExecResult>;

  /**
   * Start argv detached under setsid (a new process group), output to opts.logPath.
   * Idempotent by launchId: if a record for launchId exists and its process is alive,
   * that record is returned with reattached=true and nothing is started. If the record
   * exists but the process has exited, the old record is returned (reattached=true) so the
   * caller can read its exit code; the caller must choose a new launchId to relaunch.
   */
  spawnDetached(launchId: string, argv: string[], opts: SpawnOptions): Promise<SpawnResult>;
  /** The record for launchId, or null when aerie never launched it on this host. */
  findLaunch(launchId: string): Promise<ProcRecord | null>;
  /** All launch records on this host (for cancel and orphan checks). */
  listLaunches(): Promise<ProcRecord[]>;
  procStatus(record: ProcRecord): Promise<ProcStatus>;
  /** TERM to the recorded group, wait up to graceMs, KILL, verify the group is empty. */
  killGroup(record: ProcRecord, opts?: { graceMs?: number }): Promise<KillResult>;

  readFile(path: string): Promise<Buffer>;
  /** Temp name + fsync + rename: readers never see a partial file. */
  writeFileAtomic(path: string, data: string | Buffer): Promise<void>;
  /** Append bytes (used for resumable jsonl outputs; callers fsync via closeAppend semantics). */
  appendFile(path: string, data: string | Buffer): Promise<void>;
  stat(path: string): Promise<FileStat | null>;
  list(dir: string): Promise<FileStat[]>;
  mkdirp(path: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  remove(path: string): Promise<void>;
  /** Bytes of path from offset on (at most maxBytes), plus the new offset. */
  tailFrom(path: string, offset: number, maxBytes?: number): Promise<{ data: string; offset: number }>;
  /** Free bytes on the filesystem holding path. */
  freeBytes(path: string): Promise<number>;

  /** A base URL (no trailing slash) the worker can reach for a server bound to 127.0.0.1:port on the host. */
  httpBase(port: number): Promise<string>;
  /** Is something listening on 127.0.0.1:port on the host? Returns the holder's pid when known. */
  portHolder(port: number): Promise<{ listening: boolean; pid?: number; command?: string }>;

  gpuInventory(): Promise<GpuInventory>;

  close(): Promise<void>;
}
