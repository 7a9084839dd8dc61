/**
 * runGenerate against the SGLang simulator, a real child process in its own process group:
 * both input formats, resume after an abort, and the in-flight count the server sees.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LocalHost } from '../../src/hosts/local.js';
import { runGenerate, type GenerateJob } from '../../src/stages/generate.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PROMPTS = join(ROOT, 'examples/data/prompts.jsonl');

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
beforeAll(async () => {
  sim = await startSim();
}, 90_000);
afterAll(async () => {
  if (sim) await stopSim(sim);
}, 30_000);

let dir: string;
let host: LocalHost;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aerie-gensim-'));
  host = new LocalHost({ name: 'local', workdir: dir });
});
afterEach(async () => {
  await host.close();
  await rm(dir, { recursive: true, force: true });
});

function job(over: Partial<GenerateJob>): GenerateJob {
  return {
    host,
    baseUrl: sim.baseUrl,
    model: 'sim-llama-8b',
    inputPath: PROMPTS,
    outDir: join(dir, 'out'),
    temperature: 0.7,
    maxTokens: 48,
    concurrency: 8,
    retries: 2,
    shardSize: 16,
    flushMs: 200,
    ...over,
  };
}

const readText = (p: string) => readFile(p, 'utf8');
const ids = (text: string) => text.split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { id: string }).id);

describe('runGenerate against the simulator', () => {
  it('regenerates SpecForge and ShareGPT inputs alike, answers replacing the originals', async () => {
    const spec = await runGenerate(job({ numSamples: 24, outDir: join(dir, 'spec') }));
    expect(spec.counts).toEqual({ input: 24, ok: 24, error: 0, skipped: 0, rejected: 0 });

    const lines = (await readText(PROMPTS)).split('\n').filter(Boolean).slice(0, 24);
    const sharegpt = lines.map((l) => {
      const o = JSON.parse(l) as { id: string; conversations: { role: string; content: string }[] };
      const from = { user: 'human', assistant: 'gpt', system: 'system' } as Record<string, string>;
      return JSON.stringify({ id: o.id, conversations: o.conversations.map((t) => ({ from: from[t.role], value: t.content })) });
    });
    await writeFile(join(dir, 'sharegpt.jsonl'), sharegpt.join('\n') + '\n');
    const sg = await runGenerate(job({ inputPath: join(dir, 'sharegpt.jsonl'), outDir: join(dir, 'sg') }));
    expect(sg.counts).toEqual(spec.counts);

    const specText = await readText(join(dir, 'spec', 'train.jsonl'));
    expect(await readText(join(dir, 'sg', 'train.jsonl'))).toBe(specText);
    const first = JSON.parse(specText.split('\n')[0]) as { conversations: { role: string; content: string }[] };
    const assistants = first.conversations.filter((t) => t.role === 'assistant');
    expect(assistants.length).toBeGreaterThan(0);
    for (const a of assistants) expect(a.content).not.toMatch(/^\(original/);
  }, 120_000);

  it('after an abort mid-run, the resume yields each id once and the same ok rows as an uninterrupted run', async () => {
    await runGenerate(job({ outDir: join(dir, 'full') }));
    const full = await readText(join(dir, 'full', 'train.jsonl'));

    const ctrl = new AbortController();
    await expect(
      runGenerate(job({ signal: ctrl.signal, onProgress: (p) => p.done >= 30 && ctrl.abort() })),
    ).rejects.toMatchObject({ name: 'AbortError' });
    const resumed = await runGenerate(job({}));
    expect(resumed.resumed).toBeGreaterThanOrEqual(30);
    expect(resumed.resumed).toBeLessThan(96);
    const text = await readText(join(dir, 'out', 'train.jsonl'));
    expect(new Set(ids(text)).size).toBe(96);
    expect(ids(text)).toHaveLength(96);
    expect(text).toBe(full);
    expect(resumed.counts.ok + resumed.counts.error + resumed.counts.skipped + resumed.counts.rejected).toBe(96);
  }, 180_000);

  it('keeps the target concurrency in flight: the server sees it running', async () => {
    // Its own simulator with slower decoding, so a request lasts long against the client's turnaround.
    const slow = await startSim({ AERIE_SIM_DECODE_SCALE: '0.5' });
    try {
      await runGenerate(job({ baseUrl: slow.baseUrl, concurrency: 6, maxTokens: 160, numSamples: 36 }));
    } finally {
      await stopSim(slow);
    }
    const running = [...slow.log().matchAll(/Decode batch\. #running-req: (\d+)/g)].map((m) => Number(m[1]));
    expect(running.length).toBeGreaterThan(10);
    expect(Math.max(...running)).toBe(6);
    // A pool (no batch barrier) holds the target through the run, not just at the start: ignoring
    // the drain at the end, the server runs close to 6 on average (a barrier would sag to the stragglers).
    const body = running.slice(0, Math.floor(running.length * 0.8));
    const mean = body.reduce((s, n) => s + n, 0) / body.length;
    expect(mean).toBeGreaterThan(0.8 * 6);
  }, 120_000);
});
