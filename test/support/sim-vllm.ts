/**
 * Test harness for `aerie-sim vllm`: start it as a real process in its own process group on a
 * free loopback port, read its output, poll with deadlines, stop exactly the group it started.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { BIN, DRAFT_CONFIG, MODEL, freePort, tempDir, until } from './sim-sglang.js';

export { MODEL, until };

export class VllmSim {
  exitCode: number | null | undefined = undefined;
  readonly exited: Promise<number | null>;
  readonly base: string;

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
    readonly logPath: string,
  ) {
    this.base = `http://127.0.0.1:${port}`;
    this.exited = new Promise((resolve) =>
      child.on('exit', (code) => {
        this.exitCode = code;
        resolve(code);
      }),
    );
  }

  /** `aerie-sim vllm --host 127.0.0.1 --port P <args>`, fast timings unless env says otherwise. */
  static async start(args: string[], env: Record<string, string> = {}): Promise<VllmSim> {
    const port = await freePort();
    // stdout and stderr into one file, as aerie's launch wrapper writes a server's log: one order for both.
    const logPath = path.join(await tempDir('aerie-vllm-log-'), 'server.log');
    const fd = openSync(logPath, 'a');
    try {
      const child = spawn(process.execPath, [BIN, 'vllm', '--host', '127.0.0.1', '--port', String(port), ...args], {
        env: { ...process.env, AERIE_SIM_TIME_SCALE: '0.005', AERIE_SIM_DECODE_SCALE: '0', ...env },
        stdio: ['ignore', fd, fd],
        detached: true,
      });
      return new VllmSim(child, port, logPath);
    } finally {
      closeSync(fd);
    }
  }

  /** Everything the process has written so far. */
  get out(): string {
    return readFileSync(this.logPath, 'utf8');
  }

  get alive(): boolean {
    return this.exitCode === undefined;
  }

  async status(pathname: string): Promise<number | null> {
    try {
      const res = await fetch(this.base + pathname);
      await res.arrayBuffer();
      return res.status;
    } catch {
      return null;
    }
  }

  async ready(deadlineMs = 30_000): Promise<void> {
    await until('/health 200', deadlineMs, async () => {
      if (!this.alive) throw new Error(`sim exited (${this.exitCode}) before ready:\n${this.out}`);
      return (await this.status('/health')) === 200 ? true : undefined;
    });
  }

  async json(pathname: string, body?: unknown): Promise<{ status: number; body: any; text: string }> {
    const res = await fetch(
      this.base + pathname,
      body === undefined
        ? {}
        : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
    );
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* plain text */
    }
    return { status: res.status, body: parsed, text };
  }

  async waitExit(deadlineMs = 20_000): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.exited,
        new Promise<never>((_, rej) => {
          timer = setTimeout(() => rej(new Error(`sim did not exit in ${deadlineMs} ms:\n${this.out}`)), deadlineMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGTERM our process group (by the pgid we started), then SIGKILL if it lingers. */
  async stop(): Promise<number | null> {
    if (!this.alive) return this.exitCode ?? null;
    const pgid = this.child.pid!;
    try {
      process.kill(-pgid, 'SIGTERM');
    } catch {
      return this.exitCode ?? null;
    }
    const timer = setTimeout(() => {
      try {
        if (this.alive) process.kill(-pgid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, 5000);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
}

/** Run a sim that is expected to end by itself; returns it (exitCode, out). */
export async function runToExit(
  args: string[],
  env: Record<string, string> = {},
  deadlineMs = 20_000,
): Promise<VllmSim> {
  const sim = await VllmSim.start(args, env);
  try {
    await sim.waitExit(deadlineMs);
  } finally {
    await sim.stop();
  }
  return sim;
}

/** An EAGLE-3 drafter directory: the example draft config, edited; with a safetensors header naming `tensors` when given. */
export async function makeVllmDrafter(
  edit: (cfg: Record<string, any>) => void = () => undefined,
  tensors?: string[],
): Promise<string> {
  const dir = await tempDir('aerie-vllm-draft-');
  const cfg = JSON.parse(await fs.readFile(DRAFT_CONFIG, 'utf8')) as Record<string, any>;
  edit(cfg);
  await fs.writeFile(path.join(dir, 'config.json'), JSON.stringify(cfg));
  if (tensors) {
    const header: Record<string, unknown> = {};
    for (const t of tensors) header[t] = { dtype: 'BF16', shape: [0], data_offsets: [0, 0] };
    const json = Buffer.from(JSON.stringify(header));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    await fs.writeFile(path.join(dir, 'model.safetensors'), Buffer.concat([len, json]));
  }
  return dir;
}

/** A simulator target like examples/models/sim-llama-8b with another depth (its tokenizer kept). */
export async function makeTarget(numLayers: number): Promise<string> {
  const dir = await tempDir('aerie-vllm-target-');
  const cfg = JSON.parse(await fs.readFile(path.join(MODEL, 'config.json'), 'utf8')) as Record<string, unknown>;
  cfg.num_hidden_layers = numLayers;
  await fs.writeFile(path.join(dir, 'config.json'), JSON.stringify(cfg));
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    await fs.copyFile(path.join(MODEL, f), path.join(dir, f));
  return dir;
}

export function spec(draft: string, method = 'eagle3', n = 3): string[] {
  return ['--speculative-config', JSON.stringify({ method, model: draft, num_speculative_tokens: n })];
}
