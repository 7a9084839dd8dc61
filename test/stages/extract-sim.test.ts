/**
 * runExtract against the SGLang simulator started as a patched extraction server
 * (SGLANG_HS_DUMP_DIR set), a real child process in its own process group.
 */
import { mkdtemp, readFile, readdir, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LocalHost } from '../../src/hosts/local.js';
import { runExtract, type ExtractJob } from '../../src/stages/extract.js';
import { startSim, stopSim, type Sim } from '../support/sim.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PROMPTS = join(ROOT, 'examples/data/prompts.jsonl');
const HIDDEN = 512; // examples/models/sim-llama-8b/config.json

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
