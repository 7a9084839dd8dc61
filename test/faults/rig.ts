/**
 * The fault rig: a real Temporal dev server on a persistent SQLite file, real `aerie worker`
 * processes, and the means to kill either on purpose. Every process it starts is recorded
 * and stopped by its own process group.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { ensureSearchAttributes } from '../../src/temporal/connect.js';
import {
  ensureDevServer,
  freePort,
  portOpen,
  procStartTime,
  stopDevServer,
  type DevServerRecord,
} from '../../src/temporal/dev-server.js';
import { stopRecordedLaunches } from '../support/cleanup.js';
import { waitUntil } from '../support/temporal.js';
import { signalGroup, spawnAerieWorker } from '../support/worker-process.js';

export class FaultRig {
  readonly workers = new Map<string, number>();
  server!: DevServerRecord;
  client!: Client;
  private connection!: Connection;

  private constructor(readonly dir: string) {}

  static async start(): Promise<FaultRig> {
    const rig = new FaultRig(await mkdtemp(join(tmpdir(), 'aerie-faults-')));
    rig.server = await ensureDevServer({
      dir: rig.dir,
      port: await freePort(),
      uiPort: await freePort(),
      headless: true,
    });
    await rig.connect();
    return rig;
  }

  private async connect(): Promise<void> {
    this.connection = await Connection.connect({ address: this.server.address });
    await ensureSearchAttributes(this.connection, 'default');
    this.client = new Client({ connection: this.connection, namespace: 'default' });
  }

  /** A real `aerie worker` process in its own process group. */
  async startWorker(name: string): Promise<number> {
    const pgid = await spawnAerieWorker(this.server.address, join(this.dir, `${name}.log`));
    this.workers.set(name, pgid);
    return pgid;
  }

  killWorker(name: string): void {
    const pgid = this.workers.get(name);
    if (pgid === undefined) throw new Error(`no worker named ${name}`);
    signalGroup(pgid, 'SIGKILL');
    this.workers.delete(name);
  }

  /** SIGKILL the dev server (its recorded group), then start it again on the same port and database. */
  async crashAndRestartTemporal(): Promise<void> {
    const old = this.server;
    await this.connection.close().catch(() => undefined);
    signalGroup(old.pid, 'SIGKILL');
    await waitUntil(
      async () => (await procStartTime(old.pid)) !== old.startTime && !(await portOpen(old.port)),
      'the dev server to die and free its port',
      30_000,
      100,
    );
    this.server = await ensureDevServer({ dir: this.dir, port: old.port, uiPort: old.uiPort, headless: true });
    await this.connect();
  }

  async stop(): Promise<void> {
    for (const pgid of this.workers.values()) signalGroup(pgid, 'SIGKILL');
    this.workers.clear();
    await this.connection?.close().catch(() => undefined);
    await stopRecordedLaunches(this.dir);
    await stopDevServer(this.dir);
    await rm(this.dir, { recursive: true, force: true });
  }
}
