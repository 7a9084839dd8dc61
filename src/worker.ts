/**
 * The aerie worker: the pipeline and GPU-lease workflows plus every activity, on one task queue; or,
 * for a site (hosts.<name>.task-queue), every activity and no workflow on that site's queue. Hosts
 * (and their SSH connections, later) are created once per worker and shared by activities.
 */
import { mkdirSync, openSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import {
  DefaultLogger,
  makeTelemetryFilterString,
  NativeConnection,
  Runtime,
  Worker,
  type LogEntry,
  type WorkerOptions,
} from '@temporalio/worker';
import { createActivities } from './activities/index.js';
import { leaseActivities } from './activities/leases.js';
import { HostPool } from './hosts/index.js';
import { HEARTBEAT_THROTTLE_MS } from './config/heartbeat.js';
import { TASK_QUEUE } from './shared.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('./workflows/index.ts', import.meta.url));

/**
 * Compiled (dist/), the worker loads the workflow bundle the build made beside it instead of
 * bundling with webpack at start-up: seconds faster, and webpack never enters the process.
 */
const PREBUILT: WorkerOptions['workflowBundle'] | undefined = import.meta.url.endsWith('.js')
  ? { codePath: fileURLToPath(new URL('./workflow-bundle.js', import.meta.url)) }
  : undefined;

export interface AerieWorkerOptions {
  connection: NativeConnection;
  namespace?: string;
  taskQueue?: string;
  /** Pre-bundled workflow code (tests bundle once per file); otherwise the build's, or bundled from source. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  hosts?: HostPool;
  /**
   * Where the GPU-lease workflows this worker's runs ask run (default the pipeline's queue, which
   * every worker polls), so a host's leases are kept while any worker lives, not only the asking run's.
   */
  leaseTaskQueue?: string;
  /**
   * Activities only, no workflows (a site worker, `aerie worker --task-queue Q`): the workflow
   * tasks stay on the pipeline's queue, so a site machine needs neither the bundle nor webpack.
   */
  activitiesOnly?: boolean;
  /** Default: the SDK's pid@hostname, with the queue after it for a site worker, as the Web UI and history show it. */
  identity?: string;
}

export async function createWorker(opts: AerieWorkerOptions): Promise<{ worker: Worker; hosts: HostPool }> {
  const hosts = opts.hosts ?? new HostPool();
  const worker = await Worker.create({
    connection: opts.connection,
    namespace: opts.namespace ?? 'default',
    taskQueue: opts.taskQueue ?? TASK_QUEUE,
    identity:
      opts.identity ?? `${process.pid}@${hostname()}${opts.activitiesOnly ? ` ${opts.taskQueue ?? TASK_QUEUE}` : ''}`,
    // GPU leases (activities/leases.ts) beside the rest: typed apart, registered together.
    activities: {
      ...createActivities({ hosts }),
      ...leaseActivities({ hosts, leaseTaskQueue: opts.leaseTaskQueue ?? TASK_QUEUE }),
    },
    ...workflowSource(opts),
    // Long activities mostly wait on remote processes; a handful of slots is plenty on 2 cores.
    maxConcurrentActivityTaskExecutions: 32,
    // Finished in-flight heartbeats should reach the server before a graceful stop.
    shutdownGraceTime: '5s',
    // Heartbeats carry the live phase the CLI and the UI show: send them within a second,
    // not at the default 0.8 × heartbeatTimeout (24 s). run.heartbeat-timeout is validated
    // against this interval (MIN_HEARTBEAT_TIMEOUT_MS).
    maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE_MS,
  });
  return { worker, hosts };
}

function workflowSource(opts: AerieWorkerOptions): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  if (opts.activitiesOnly) return {};
  return opts.workflowBundle || PREBUILT
    ? { workflowBundle: opts.workflowBundle ?? PREBUILT }
    : { workflowsPath: WORKFLOWS_PATH };
}

let runtimeLog: string | undefined;

/**
 * `aerie run` owns its terminal: the stage table and, at the end, one reason. Its in-process
 * worker logs to a file instead, the SDK's lines and the Rust core's alike (forwarded, or
 * core would print them to stderr itself): an expected failure such as preflight's is logged
 * by the SDK as a WARN with its stack and task token, which a user should never have to read
 * past. `aerie worker` keeps the SDK's default, its terminal being its log. Once per process
 * (the SDK's Runtime is a singleton); returns the file the logs go to.
 */
export function installFileLogRuntime(logPath: string): string {
  if (runtimeLog) return runtimeLog;
  mkdirSync(dirname(logPath), { recursive: true });
  const fd = openSync(logPath, 'a');
  // Synchronous appends: the CLI exits with process.exit right after the run ends, which
  // would drop lines still queued in a stream, and the last lines are the ones that explain.
  const write = (entry: LogEntry) => {
    const at = new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString();
    const meta =
      entry.meta && Object.keys(entry.meta).length ? ` ${inspect(entry.meta, { depth: 6, breakLength: 160 })}` : '';
    writeSync(fd, `${at} [${entry.level}] ${entry.message}${meta}\n`);
  };
  Runtime.install({
    logger: new DefaultLogger('INFO', write),
    telemetryOptions: { logging: { forward: {}, filter: makeTelemetryFilterString({ core: 'INFO', other: 'WARN' }) } },
  });
  runtimeLog = logPath;
  return logPath;
}
