/**
 * Test harness for the simulated SGLang server: start it as a real process on a free
 * loopback port, read its logs, poll with deadlines, and stop exactly the process started.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../src/temporal/dev-server.js';
import { makeWorkdir } from './workdir.js';

export const BIN = fileURLToPath(new URL('../../bin/aerie-sim.mjs', import.meta.url));
export const MODEL = fileURLToPath(new URL('../../examples/models/sim-llama-8b', import.meta.url));
export const DRAFT_CONFIG = fileURLToPath(
  new URL('../../examples/models/sim-llama-8b-eagle3-draft.json', import.meta.url),
);

// The one free-port picker and temp-folder maker every test uses.
export { freePort };
export const tempDir = makeWorkdir;

/** A drafter directory: the example EAGLE-3 draft config, with the simulated quality set. */
export async function makeDrafter(acceptLength: number | null): Promise<string> {
  const dir = await tempDir('aerie-sim-draft-');
  const cfg = JSON.parse(await fs.readFile(DRAFT_CONFIG, 'utf8')) as Record<string, unknown>;
  if (acceptLength !== null) cfg.aerie_sim = { accept_length: acceptLength };
  await fs.writeFile(path.join(dir, 'config.json'), JSON.stringify(cfg));
  return dir;
}

export async function until<T>(
  what: string,
  deadlineMs: number,
  probe: () => Promise<T | undefined> | T | undefined,
): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export class Sim {
  stdout = '';
  stderr = '';
  exitCode: number | null | undefined = undefined;
  readonly exited: Promise<number | null>;
  readonly base: string;

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
  ) {
    this.base = `http://127.0.0.1:${port}`;
    child.stdout!.on('data', (d: Buffer) => (this.stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) =>
      child.on('exit', (code) => {
        this.exitCode = code;
        resolve(code);
      }),
    );
  }

  static async start(args: string[], env: Record<string, string> = {}, port?: number): Promise<Sim> {
    const p = port ?? (await freePort());
    const child = spawn(process.execPath, [BIN, 'sglang', '--port', String(p), ...args], {
      env: { ...process.env, AERIE_SIM_TIME_SCALE: '0.005', AERIE_SIM_DECODE_SCALE: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new Sim(child, p);
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

  async ready(deadlineMs = 20_000): Promise<void> {
    await until('health 200', deadlineMs, async () => {
      if (!this.alive) throw new Error(`sim exited (${this.exitCode}) before ready:\n${this.stderr}`);
      return (await this.status('/health')) === 200 ? true : undefined;
    });
  }

  async json(pathname: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(
      this.base + pathname,
      body === undefined
        ? {}
        : {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          },
    );
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* plain text */
    }
    return { status: res.status, body: parsed };
  }

  /** POST and collect an SSE stream's `data:` payloads ('[DONE]' kept as a string). */
  async sse(pathname: string, body: unknown): Promise<unknown[]> {
    const res = await fetch(this.base + pathname, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    return text
      .split('\n\n')
      .filter((b) => b.startsWith('data: '))
      .map((b) => {
        const data = b.slice(6);
        return data === '[DONE]' ? data : JSON.parse(data);
      });
  }

  async waitExit(deadlineMs = 10_000): Promise<number | null> {
    return Promise.race([
      this.exited,
      new Promise<never>((_, rej) =>
        setTimeout(() => rej(new Error(`sim did not exit in ${deadlineMs} ms:\n${this.stderr}`)), deadlineMs),
      ),
    ]);
  }

  /** SIGTERM our process (by its pid), then SIGKILL if it lingers. */
  async stop(): Promise<number | null> {
    if (!this.alive) return this.exitCode ?? null;
    const pid = this.child.pid!;
    process.kill(pid, 'SIGTERM');
    const timer = setTimeout(() => {
      if (this.alive) process.kill(pid, 'SIGKILL');
    }, 5000);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
}

/** Run a short-lived sim to completion (faults that end the process). */
export async function runToExit(args: string[], env: Record<string, string> = {}, deadlineMs = 15_000): Promise<Sim> {
  const sim = await Sim.start(args, env);
  try {
    await sim.waitExit(deadlineMs);
  } finally {
    await sim.stop();
  }
  return sim;
}
