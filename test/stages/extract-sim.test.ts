/**
 * runExtract against the SGLang simulator started as a patched extraction server
 * (SGLANG_HS_DUMP_DIR set), a real child process in its own process group.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LocalHost } from '../../src/hosts/local.js';
import { runExtract, type ExtractJob } from '../../src/stages/extract.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PROMPTS = join(ROOT, 'examples/data/prompts.jsonl');
const HIDDEN = 512; // examples/models/sim-llama-8b/config.json

interface Sim {
  child: ChildProcess;
  pgid: number;
  baseUrl: string;
  log: () => string;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

async function startSim(env: Record<string, string> = {}): Promise<Sim> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [join(ROOT, 'bin/aerie-sim.mjs'), 'sglang', '--model-path', join(ROOT, 'examples/models/sim-llama-8b'), '--port', String(port)],
    {
      cwd: ROOT,
      detached: true, // setsid: its own process group, stopped by pgid in afterAll
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, AERIE_SIM_TIME_SCALE: '0.01', AERIE_SIM_DECODE_SCALE: '0.01', ...env },
    },
  );
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const sim: Sim = { child, pgid: child.pid!, baseUrl: `http://127.0.0.1:${port}`, log: () => log };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`simulator exited (${child.exitCode}):\n${log}`);
    const status = await fetch(`${sim.baseUrl}/health`).then((r) => r.status, () => 0);
    if (status === 200) return sim;
    await new Promise((r) => setTimeout(r, 100));
  }
  await stopSim(sim);
  throw new Error(`simulator not ready within 60 s:\n${log}`);
}

async function stopSim(sim: Sim): Promise<void> {
  if (sim.child.exitCode !== null || sim.child.signalCode !== null) return;
  const exited = new Promise((r) => sim.child.once('exit', r));
  try {
    process.kill(-sim.pgid, 'SIGTERM');
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-sim.pgid, 'SIGKILL');
    } catch {
      // already gone
    }
  }, 5000);
  await exited;
  clearTimeout(timer);
}

let sim: Sim;
let simDir: string;
let dumpDir: string;
beforeAll(async () => {
  simDir = await mkdtemp(join(tmpdir(), 'aerie-extsim-'));
  dumpDir = join(simDir, 'shm');
  sim = await startSim({ SGLANG_HS_DUMP_DIR: dumpDir });
}, 90_000);
afterAll(async () => {
  if (sim) await stopSim(sim);
  await rm(simDir, { recursive: true, force: true });
}, 30_000);

let dir: string;
let host: LocalHost;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aerie-extsim-'));
  host = new LocalHost({ name: 'local', workdir: dir });
  const lines = (await readFile(PROMPTS, 'utf8')).split('\n').filter(Boolean).slice(0, 20);
  await writeFile(join(dir, 'train.jsonl'), lines.join('\n') + '\n');
});
afterEach(async () => {
  await host.close();
  await rm(dir, { recursive: true, force: true });
});

function job(over: Partial<ExtractJob> = {}): ExtractJob {
  return {
    host,
    baseUrl: sim.baseUrl,
    samplesPath: join(dir, 'train.jsonl'),
    dumpDir,
    outDir: join(dir, 'hs'),
    hiddenSize: HIDDEN,
    concurrency: 4,
    indexBatch: 4,
    flushMs: 100,
    ...over,
  };
}

interface Entry {
  id: string;
  file: string;
  tokens: number;
  bytes: number;
}
const readIndex = async (): Promise<Entry[]> =>
  (await readFile(join(dir, 'hs', 'index.jsonl'), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Entry);

describe('runExtract against the simulator', () => {
  it('verifies every dump at prompt_tokens × 3 × H × 2 bytes and moves it out of the dump dir', async () => {
    const summary = await runExtract(job());
    expect(summary.counts).toEqual({ input: 20, ok: 20, error: 0, resumed: 0 });
    const index = await readIndex();
    expect(index).toHaveLength(20);
    for (const e of index) {
      expect(e.file).toBe(`rows_0-2000/${e.id}.hs`);
      expect(e.bytes).toBe(e.tokens * 3 * HIDDEN * 2);
      expect((await stat(join(dir, 'hs', e.file))).size).toBe(e.bytes);
    }
    expect(summary.totalBytes).toBe(index.reduce((s, e) => s + e.bytes, 0));
    expect(await readdir(dumpDir)).toEqual([]);
  }, 120_000);

  it('resumes by id: finished ids are skipped and a truncated file is redone', async () => {
    await runExtract(job());
    const [victim] = await readIndex();
    await truncate(join(dir, 'hs', victim.file), 100);
    const before = sim.log().length;
    const summary = await runExtract(job());
    expect(summary.counts).toEqual({ input: 20, ok: 20, error: 0, resumed: 19 });
    expect((await stat(join(dir, 'hs', victim.file))).size).toBe(victim.bytes);
    // Exactly one prefill was sent again: the truncated sample's.
    expect(sim.log().slice(before).match(/"POST \/generate HTTP/g)).toHaveLength(1);
    expect(await readdir(dumpDir)).toEqual([]);
  }, 120_000);

  it('refuses to start when the destination cannot hold the estimate', async () => {
    await expect(runExtract(job({ hiddenSize: 2 ** 45 }))).rejects.toMatchObject({
      name: 'InsufficientSpaceError',
      message: expect.stringMatching(/needs about .* but only .* are free/),
    });
    expect(await readdir(dumpDir)).toEqual([]);
  }, 30_000);
});
