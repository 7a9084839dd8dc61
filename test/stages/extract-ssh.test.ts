/**
 * runExtract on an SshHost (a real sshd on loopback) against the simulator with aerie's
 * capture, dumping into a tmpfs the test mounts while the output is on disk: the GPU-host
 * layout. aerie's package is staged over SSH, tokens, conversion and the self-check run on
 * the host, and the SSH session is cut in the middle of the run: every sample still lands
 * once, whole, and the dump folder ends empty.
 */
import { readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SshHost } from '../../src/hosts/ssh/ssh-host.js';
import { shipAeriePy, type AeriePy } from '../../src/stages/common/aerie-py.js';
import { runExtract } from '../../src/stages/extract/server-driver.js';
import {
  CAPTURE_FLAGS,
  captureSimEnv,
  ensureSimTarget,
  readJsonl,
  regenerated,
  VENV_PY,
} from '../support/capture-sim.js';
import { startSim, stopSim, type Sim } from '../support/sim.js';
import { startSshFixture, type SshFixture } from '../support/ssh-fixture.js';
import { mountTmpfs, type Tmpfs } from '../support/tmpfs.js';

const ROOT = resolve(import.meta.dirname, '../..');
const MODEL = join(ROOT, 'examples/models/sim-llama-8b');

let fx: SshFixture;
let ram: Tmpfs;
let sim: Sim;
let host: SshHost;
let py: AeriePy;

beforeAll(async () => {
  await ensureSimTarget();
  fx = await startSshFixture();
  ram = await mountTmpfs(fx.dir, 256);
  host = fx.host();
  py = await shipAeriePy(host, VENV_PY);
  sim = await startSim(captureSimEnv(py.root, ram.path), CAPTURE_FLAGS);
}, 120_000);

afterAll(async () => {
  if (sim) await stopSim(sim);
  const tmpfs = ram;
  await fx?.stop().catch(() => undefined);
  await tmpfs?.unmount();
}, 60_000);

describe('runExtract over SSH, dumps on tmpfs, output on disk', () => {
  it('lands every sample once and whole across a cut SSH session, and leaves the dump folder empty', async () => {
    const samples = await regenerated(host, fx.dir, 24, { baseUrl: sim.baseUrl, concurrency: 6 });
    const outDir = join(fx.dir, 'hs');
    const drops = host.link.stats.drops;
    let cutting: Promise<number[]> | null = null;
    const summary = await runExtract({
      host,
      baseUrl: sim.baseUrl,
      py,
      samplesPath: samples,
      dumpDir: ram.path,
      outDir,
      modelPath: MODEL,
      hiddenSize: 512,
      chatTemplate: 'llama3',
      maxLength: 512,
      fileGroupSize: 2000,
      crossCheck: 'auto',
      trustRemoteCode: false,
      concurrency: 6,
      selfCheck: { samples: 4, finalSamples: 8, minAgreement: 0.5 },
      convertBatch: 4,
      convertLingerMs: 200,
      onProgress: (p) => {
        if (p.ok >= 6 && cutting === null) cutting = fx.sshd.dropConnections();
      },
    });
    expect(cutting).not.toBeNull();
    expect((await cutting!)!.length).toBeGreaterThan(0);
    expect(host.link.stats.drops).toBeGreaterThan(drops);
    expect(summary.counts).toEqual({ input: 24, ok: 24, error: 0, resumed: 0 });

    const index = await readJsonl<{ i: number; id: string }>(join(outDir, 'index.jsonl'));
    expect(new Set(index.map((e) => e.id)).size).toBe(24);
    expect(index.map((e) => e.i).sort((a, b) => a - b)).toEqual([...Array(24).keys()]);
    expect((await readdir(join(outDir, 'rows_0-2000'))).sort()).toEqual(index.map((e) => `data_${e.i}.ckpt`).sort());
    expect(await readdir(ram.path)).toEqual([]);
  }, 240_000);
});
