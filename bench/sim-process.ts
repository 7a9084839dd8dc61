/**
 * Start aerie's simulated SGLang server as a child process on a free loopback port, for
 * the benchmarks in bench/ and the benchmark tests. Stopped by its recorded pid.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SIM_BIN = fileURLToPath(new URL('../bin/aerie-sim.mjs', import.meta.url));
export const SIM_MODEL = fileURLToPath(new URL('../examples/models/sim-llama-8b', import.meta.url));
const DRAFT_CONFIG = fileURLToPath(new URL('../examples/models/sim-llama-8b-eagle3-draft.json', import.meta.url));

export async function freeLoopbackPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/**
 * A drafter directory holding the example EAGLE-3 config with the simulated quality set, made
 * under `parent` (default the system temp dir); the caller removes it.
 */
export async function simDrafter(acceptLength: number, parent: string = tmpdir()): Promise<string> {
  const dir = await mkdtemp(join(parent, 'aerie-bench-draft-'));
  const cfg = JSON.parse(await readFile(DRAFT_CONFIG, 'utf8')) as Record<string, unknown>;
  cfg.aerie_sim = { accept_length: acceptLength };
  await writeFile(join(dir, 'config.json'), JSON.stringify(cfg));
  return dir;
}

export interface SimOptions {
  /** Extra launch flags (e.g. the speculative ones). */
  args?: string[];
  /** AERIE_SIM_DECODE_SCALE; 0 = no model delay at all. */
  decodeScale?: number;
  env?: Record<string, string>;
}

export class SimServer {
  log = '';
  private exitCode: number | null | undefined;
  private readonly exited: Promise<void>;

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
  ) {
    child.stdout!.on('data', (d: Buffer) => this.keep(d));
    child.stderr!.on('data', (d: Buffer) => this.keep(d));
    this.exited = new Promise((r) =>
      child.on('exit', (code) => {
        this.exitCode = code;
        r();
      }),
    );
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  static async start(opts: SimOptions = {}): Promise<SimServer> {
    const port = await freeLoopbackPort();
    const child = spawn(
      process.execPath,
      [
        SIM_BIN,
        'sglang',
        '--model-path',
        SIM_MODEL,
        '--port',
        String(port),
        '--skip-server-warmup',
        ...(opts.args ?? []),
      ],
      {
        env: {
          ...process.env,
          AERIE_SIM_TIME_SCALE: '0.002',
          AERIE_SIM_DECODE_SCALE: String(opts.decodeScale ?? 0),
          ...opts.env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const sim = new SimServer(child, port);
    try {
      await sim.ready();
    } catch (err) {
      await sim.stop();
      throw err;
    }
    return sim;
  }

  private keep(d: Buffer): void {
    // Keep the tail only: a long benchmark logs a line per decode interval.
    this.log = (this.log + d.toString()).slice(-20_000);
  }

  private async ready(deadlineMs = 60_000): Promise<void> {
    const end = Date.now() + deadlineMs;
    for (;;) {
      if (this.exitCode !== undefined)
        throw new Error(`simulator exited (${this.exitCode}) before it was ready:\n${this.log}`);
      const status = await fetch(`${this.baseUrl}/health`).then(
        async (r) => (await r.arrayBuffer(), r.status),
        () => 0,
      );
      if (status === 200) return;
      if (Date.now() > end) throw new Error(`simulator not ready after ${deadlineMs} ms:\n${this.log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGTERM our own process by pid, SIGKILL if it lingers. */
  async stop(): Promise<void> {
    if (this.exitCode !== undefined) return;
    const pid = this.child.pid!;
    process.kill(pid, 'SIGTERM');
    const timer = setTimeout(() => {
      if (this.exitCode === undefined) process.kill(pid, 'SIGKILL');
    }, 5000);
    await this.exited;
    clearTimeout(timer);
  }
}
