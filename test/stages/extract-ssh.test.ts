/**
 * runExtract on an SshHost (a real sshd on loopback) against the simulator as the patched
 * server, dumping into a tmpfs the test mounts while the output is on disk — the GPU-host
 * layout, where every dump must be copied across filesystems. The SSH session is cut in the
 * middle of the run; every sample still lands once, whole, and the dump dir ends empty.
 */
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SshHost } from '../../src/hosts/ssh.js';
import { runExtract } from '../../src/stages/extract.js';
import { startSim, stopSim, type Sim } from '../support/sim.js';
import { startSshFixture, type SshFixture } from '../support/ssh-fixture.js';
import { mountTmpfs, type Tmpfs } from '../support/tmpfs.js';
import { until } from '../hosts/proc-helpers.js';

const ROOT = resolve(import.meta.dirname, '../..');
const HIDDEN = 512; // examples/models/sim-llama-8b/config.json

let fx: SshFixture;
let ram: Tmpfs;
let sim: Sim;
let host: SshHost;

beforeAll(async () => {
  fx = await startSshFixture();
  ram = await mountTmpfs(fx.dir, 256);
  sim = await startSim({ SGLANG_HS_DUMP_DIR: ram.path });
  host = fx.host();
}, 120_000);

afterAll(async () => {
  if (sim) await stopSim(sim);
  const tmpfs = ram;
  await fx?.stop().catch(() => undefined);
  await tmpfs?.unmount();
}, 60_000);

describe('runExtract over SSH, dumps on tmpfs, output on disk', () => {
  it('lands every dump once and whole across a cut SSH session, and leaves the dump dir empty', async () => {
    const lines = (await readFile(join(ROOT, 'examples/data/prompts.jsonl'), 'utf8')).split('\n').filter(Boolean).slice(0, 40);
    const samples = join(fx.dir, 'train.jsonl');
    await writeFile(samples, lines.join('\n') + '\n');
    const outDir = join(fx.dir, 'hs');
    const drops = host.link.stats.drops;
    let cutting: Promise<number[]> | null = null;
    const summary = await runExtract({
      host,
      baseUrl: sim.baseUrl,
      samplesPath: samples,
      dumpDir: ram.path,
      outDir,
      hiddenSize: HIDDEN,
      concurrency: 8,
      moveBatch: 8,
      moveLingerMs: 200,
      indexBatch: 8,
      flushMs: 200,
      onProgress: (p) => {
        if (p.ok >= 5 && cutting === null) cutting = fx.sshd.dropConnections();
      },
    });
    expect(cutting).not.toBeNull();
    expect((await cutting!)!.length).toBeGreaterThan(0);
    expect(host.link.stats.drops).toBeGreaterThan(drops);
    expect(summary.counts).toEqual({ input: 40, ok: 40, error: 0, resumed: 0 });

    const index = (await readFile(join(outDir, 'index.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { id: string; file: string; bytes: number });
    expect(new Set(index.map((e) => e.id)).size).toBe(40);
    for (const e of index) {
      expect(e.bytes % (3 * HIDDEN * 2)).toBe(0);
      expect((await stat(join(outDir, e.file))).size).toBe(e.bytes);
    }
    expect(await readdir(ram.path)).toEqual([]);
    // A copy cut with its session may finish beside the re-run; after that only the samples remain.
    const rows = join(outDir, 'rows_0-2000');
    await until('no staged copies in the output', async () => (await readdir(rows)).every((f) => !f.startsWith('.')), 60_000);
    expect((await readdir(rows)).sort()).toEqual(index.map((e) => `${e.id}.hs`).sort());
  }, 240_000);
});
