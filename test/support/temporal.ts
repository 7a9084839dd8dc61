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
import { LocalHost } from '../../src/hosts/local/local-host.js';
import { TASK_QUEUE } from '../../src/shared.js';
import { ensureSearchAttributes } from '../../src/temporal/connect.js';
import {
  ensureDevServer,
  freePort,
  portOpen,
  procStartTime,
  stopDevServer,
  type DevServerRecord,
} from '../../src/temporal/dev-server.js';
import { createWorker, WORKFLOWS_PATH } from '../../src/worker.js';
import { makeWorkdir, removeWorkdir } from './workdir.js';
import { signalGroup } from './processes.js';
import { spawnAerieWorker } from './worker-process.js';

export interface TestTemporal {
  dir: string;
  server: DevServerRecord;
  client: Client;
  nativeConnection: NativeConnection;
  bundle: WorkflowBundleWithSourceMap;
  /** fn with an in-process aerie worker on the task queue; its hosts (and SSH links) closed after. */
  withWorker<T>(fn: (hosts: HostPool) => Promise<T>): Promise<T>;
  /**
   * SIGKILLs the dev server (its recorded group), waits for it to be gone and its port free, and
   * starts it again on the same ports and database; `server`, `client` and `nativeConnection` are then the new ones.
   */
  crashAndRestart(): Promise<void>;
  stop(): Promise<void>;
}

export interface TestTemporalOptions {
  /** No web UI (the fault matrix's server); default false. */
  headless?: boolean;
  /** Bundle the workflows for in-process workers (`bundle`, `withWorker`); default true. */
  bundle?: boolean;
}

export async function startTestTemporal(opts: TestTemporalOptions = {}): Promise<TestTemporal> {
  quietRuntime();
  const dir = await mkdtemp(join(tmpdir(), 'aerie-temporal-'));
  const headless = opts.headless ?? false;
  let server = await ensureDevServer({ dir, port: await freePort(), uiPort: await freePort(), headless });
  const connect = async () => {
    const connection = await Connection.connect({ address: server.address });
    await ensureSearchAttributes(connection, 'default');
    const client = new Client({ connection, namespace: 'default' });
    const nativeConnection = await NativeConnection.connect({ address: server.address });
    return { connection, client, nativeConnection };
  };
  let conn = await connect();
  const bundle =
    opts.bundle === false
      ? undefined
      : await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietLogger });
  const bundled = () => {
    if (!bundle) throw new Error('startTestTemporal({ bundle: false }): no workflow bundle for an in-process worker');
    return bundle;
  };
  const close = async () => {
    await conn.nativeConnection.close().catch(() => undefined);
    await conn.connection.close().catch(() => undefined);
  };
  return {
    dir,
    get server() {
      return server;
    },
    get client() {
      return conn.client;
    },
    get nativeConnection() {
      return conn.nativeConnection;
    },
    get bundle() {
      return bundled();
    },
    async withWorker<T>(fn: (hosts: HostPool) => Promise<T>): Promise<T> {
      const hosts = new HostPool();
      const { worker } = await createWorker({
        connection: conn.nativeConnection,
        workflowBundle: bundled(),
        hosts,
        taskQueue: TASK_QUEUE,
      });
      try {
        return await worker.runUntil(fn(hosts));
      } finally {
        await hosts.closeAll();
      }
    },
    async crashAndRestart() {
      const old = server;
      await close();
      signalGroup(old.pid, 'SIGKILL');
      await waitUntil(
        async () => (await procStartTime(old.pid)) !== old.startTime && !(await portOpen(old.port)),
        'the dev server to die and free its port',
        30_000,
        100,
      );
      server = await ensureDevServer({ dir, port: old.port, uiPort: old.uiPort, headless });
      conn = await connect();
    },
    async stop() {
      await close();
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
  /** SIGKILLs the worker process started under `name`, by its recorded pgid. */
  killWorkerProcess(name: string): void;
  /** A LocalHost on `<work>/<sub>` (a run's host workdir, as the worker sees it), closed in afterAll. */
  hostAt(sub: string, opts?: { name?: string; nvidiaSmi?: string[] }): LocalHost;
}

export interface TemporalSuiteOptions extends TestTemporalOptions {
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
  /** Every worker process started, by pgid; `named` holds the ones not yet killed by name. */
  const workers: number[] = [];
  const named = new Map<string, number>();
  const hosts: LocalHost[] = [];
  beforeAll(async () => {
    work = await makeWorkdir(prefix);
    await opts.setup?.(work);
    t = await startTestTemporal({ headless: opts.headless, bundle: opts.bundle });
  }, 120_000);
  afterAll(async () => {
    for (const pgid of workers) signalGroup(pgid, 'SIGKILL');
    for (const h of hosts.splice(0)) await h.close();
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
      named.set(name, pgid);
      return pgid;
    },
    killWorkerProcess(name) {
      const pgid = named.get(name);
      if (pgid === undefined) throw new Error(`no worker process named ${name}`);
      signalGroup(pgid, 'SIGKILL');
      named.delete(name);
    },
    hostAt(sub, o = {}) {
      const h = new LocalHost({ name: o.name ?? 'local', workdir: join(suite.work, sub), nvidiaSmi: o.nvidiaSmi });
      hosts.push(h);
      return h;
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
