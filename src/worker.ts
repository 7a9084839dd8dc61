/**
 * The aerie worker: the pipeline workflow plus every activity, on one task queue. Hosts
 * (and their SSH connections, later) are created once per worker and shared by activities.
 */
import { fileURLToPath } from 'node:url';
import { DefaultLogger, NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from './activities/index.js';
import { HostPool } from './hosts/index.js';
import { HEARTBEAT_THROTTLE_MS, TASK_QUEUE } from './shared.js';

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
}

export async function createWorker(opts: AerieWorkerOptions): Promise<{ worker: Worker; hosts: HostPool }> {
  const hosts = opts.hosts ?? new HostPool();
  const worker = await Worker.create({
    connection: opts.connection,
    namespace: opts.namespace ?? 'default',
    taskQueue: opts.taskQueue ?? TASK_QUEUE,
    activities: createActivities({ hosts }),
    ...(opts.workflowBundle || PREBUILT ? { workflowBundle: opts.workflowBundle ?? PREBUILT } : { workflowsPath: WORKFLOWS_PATH }),
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

/** The CLI's live table owns the terminal: the SDK only speaks up for warnings and errors. */
export function installQuietRuntime(level: 'WARN' | 'INFO' = 'WARN'): void {
  Runtime.install({ logger: new DefaultLogger(level) });
}
