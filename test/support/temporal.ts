/**
 * A real Temporal dev server per test file: its own state dir, free ports, stopped by its
 * recorded process group in afterAll. Workflows are bundled once per file.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { HostPool } from '../../src/hosts/index.js';
import { TASK_QUEUE } from '../../src/shared.js';
import { ensureSearchAttributes } from '../../src/temporal/connect.js';
import { ensureDevServer, freePort, stopDevServer, type DevServerRecord } from '../../src/temporal/dev-server.js';
import { createWorker, WORKFLOWS_PATH } from '../../src/worker.js';
import { makeWorkdir, removeWorkdir } from './workdir.js';
import { signalGroup, spawnAerieWorker } from './worker-process.js';

export interface TestTemporal {
  dir: string;
  server: DevServerRecord;
  client: Client;
  nativeConnection: NativeConnection;
  bundle: WorkflowBundleWithSourceMap;
  /** fn with an in-process aerie worker on the task queue; its hosts (and SSH links) closed after. */
  withWorker<T>(fn: (hosts: HostPool) => Promise<T>): Promise<T>;
  stop(): Promise<void>;
}

export async function startTestTemporal(): Promise<TestTemporal> {
  quietRuntime();
  const dir = await mkdtemp(join(tmpdir(), 'aerie-temporal-'));
  const server = await ensureDevServer({ dir, port: await freePort(), uiPort: await freePort(), headless: false });
  const connection = await Connection.connect({ address: server.address });
  await ensureSearchAttributes(connection, 'default');
  const client = new Client({ connection, namespace: 'default' });
  const nativeConnection = await NativeConnection.connect({ address: server.address });
  const bundle = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietLogger });
  return {
    dir,
    server,
    client,
    nativeConnection,
    bundle,
    async withWorker<T>(fn: (hosts: HostPool) => Promise<T>): Promise<T> {
      const hosts = new HostPool();
      const { worker } = await createWorker({
        connection: nativeConnection,
        workflowBundle: bundle,
        hosts,
        taskQueue: TASK_QUEUE,
      });
      try {
        return await worker.runUntil(fn(hosts));
      } finally {
        await hosts.closeAll();
      }
    },
    async stop() {
      await nativeConnection.close().catch(() => undefined);
      await connection.close().catch(() => undefined);
      await stopDevServer(dir);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface TemporalSuite {
  /** The file's dev server, client and worker helper; read inside a hook or test. */
  readonly t: TestTemporal;
  /** The file's temp folder (`<prefix>XXXXXX`) for the runs' host workdirs. */
  readonly work: string;
  /** A real `aerie worker` process on this server, logging to `<work>/<name>.log`; returns its pgid, SIGKILLed in afterAll. */
  startWorkerProcess(name: string): Promise<number>;
}

export interface TemporalSuiteOptions {
  /** Runs once the folder exists, before the dev server starts (e.g. env the worker reads). */
  setup?: (work: string) => void | Promise<void>;
}

/**
 * A test file's Temporal dev server and temp folder, with its own beforeAll/afterAll: the
 * `aerie worker` processes it started are SIGKILLed, the server is stopped, every process
 * recorded under the folder is stopped by its launch record, then the folder goes. An
 * afterAll the file registers after this runs before it (vitest runs after-hooks as a
 * stack), so a file stops its own extra processes first.
 */
export function useTemporalSuite(prefix: string, opts: TemporalSuiteOptions = {}): TemporalSuite {
  let t: TestTemporal | undefined;
  let work: string | undefined;
  const workers: number[] = [];
  beforeAll(async () => {
    work = await makeWorkdir(prefix);
    await opts.setup?.(work);
    t = await startTestTemporal();
  }, 120_000);
  afterAll(async () => {
    for (const pgid of workers) signalGroup(pgid, 'SIGKILL');
    await t?.stop();
    if (work) await removeWorkdir(work);
  });
  const unready = (what: string) =>
    new Error(`useTemporalSuite('${prefix}'): ${what} is made in beforeAll; read it inside a hook or test`);
  const suite: TemporalSuite = {
    get t() {
      if (!t) throw unready('the dev server');
      return t;
    },
    get work() {
      if (!work) throw unready('the folder');
      return work;
    },
    async startWorkerProcess(name) {
      const pgid = await spawnAerieWorker(suite.t.server.address, join(suite.work, `${name}.log`));
      workers.push(pgid);
      return pgid;
    },
  };
  return suite;
}

const noop = () => undefined;
const quietLogger = { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: console.error };

/** Poll until cond() returns a value, or fail naming what was awaited. */
export async function waitUntil<T>(
  cond: () => Promise<T | undefined | false>,
  what: string,
  timeoutMs = 120_000,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

let runtimeInstalled = false;
/** Worker logs at WARN: expected failures in tests would otherwise bury the test output. */
function quietRuntime(): void {
  if (runtimeInstalled) return;
  Runtime.install({ logger: new DefaultLogger('WARN') });
  runtimeInstalled = true;
}
