/**
 * runExtract end to end against the SGLang simulator carrying aerie's capture plugin (a real
 * child process in its own process group), on conversations the simulator itself regenerated:
 * aerie's package staged on the host, tokens from the target's real tokenizer, prefills by
 * ids, the real converter, and the real self-check on the simulator's states.
 */
import { mkdir, readdir, truncate } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { shipAeriePy, type AeriePy } from '../../src/stages/common/aerie-py.js';
import { runExtract } from '../../src/stages/extract/server-driver.js';
import { type ExtractJob } from '../../src/stages/extract/server-job.js';
import {
  CAPTURE_FLAGS,
  captureSimEnv,
  ensureSimTarget,
  readJsonl,
  regenerated,
  VENV_PY,
} from '../support/capture-sim.js';
import { useLocalHost } from '../support/local-host.js';
import { startSim, stopSim, type Sim } from '../support/sim.js';

const ROOT = resolve(import.meta.dirname, '../..');
const MODEL = join(ROOT, 'examples/models/sim-llama-8b');
const HIDDEN = 512; // examples/models/sim-llama-8b/config.json

const fx = useLocalHost('aerie-extsim-');
let dir: string;
let host: LocalHost;
let py: AeriePy;
let sim: Sim;
let dumpDir: string;
let samples: string;

beforeAll(async () => {
  await ensureSimTarget();
  ({ dir, host } = fx);
  py = await shipAeriePy(host, VENV_PY);
  dumpDir = join(dir, 'dumps', 'r1');
  await mkdir(dumpDir, { recursive: true }); // as the launch does: the plugin refuses a missing folder
  sim = await startSim(captureSimEnv(py.root, dumpDir), CAPTURE_FLAGS);
  // The simulator's own regenerated answers: the states must predict them.
  samples = await regenerated(host, dir, 12, { baseUrl: sim.baseUrl, maxTokens: 48 });
}, 180_000);
afterAll(async () => {
  if (sim) await stopSim(sim);
}, 30_000);

function job(over: Partial<ExtractJob> = {}): ExtractJob {
  return {
    host,
    baseUrl: sim.baseUrl,
    py,
    samplesPath: samples,
    dumpDir,
    outDir: join(dir, 'hs'),
    modelPath: MODEL,
    hiddenSize: HIDDEN,
    chatTemplate: 'llama3',
    maxLength: 512,
    fileGroupSize: 5,
    crossCheck: 'auto',
    trustRemoteCode: false,
    concurrency: 4,
    selfCheck: { samples: 3, finalSamples: 6, minAgreement: 0.5 },
    convertBatch: 4,
    convertLingerMs: 100,
    ...over,
  };
}

const countPrefills = (log: string): number => (log.match(/"POST \/generate HTTP/g) ?? []).length;

describe("runExtract against the simulator with aerie's capture", () => {
  it("writes one SpecForge feature file per sample, indexed by id, and passes the self-check on the simulator's states", async () => {
    const summary = await runExtract(job());
    expect(summary.counts).toEqual({ input: 12, ok: 12, error: 0, resumed: 0 });
    const index = await readJsonl<{ i: number; id: string; tokens: number }>(join(dir, 'hs', 'index.jsonl'));
    expect(index.map((r) => r.i).sort((a, b) => a - b)).toEqual([...Array(12).keys()]);
    const ids = await readJsonl<{ id: string; input_ids: number[] }>(join(dir, 'hs', 'ids.jsonl'));
    expect(new Set(index.map((r) => r.id))).toEqual(new Set(ids.map((r) => r.id)));
    for (const r of index) expect(r.tokens).toBe(ids.find((x) => x.id === r.id)!.input_ids.length);
    // rows_<g>-<g+G>: G = 5 files per folder, as SpecForge's --file-group-size.
    expect((await readdir(join(dir, 'hs'))).filter((n) => n.startsWith('rows_')).sort()).toEqual([
      'rows_0-5',
      'rows_10-15',
      'rows_5-10',
    ]);
    expect((await readdir(join(dir, 'hs', 'rows_0-5'))).sort()).toEqual([
      'data_0.ckpt',
      'data_1.ckpt',
      'data_2.ckpt',
      'data_3.ckpt',
      'data_4.ckpt',
    ]);
    // Nothing is left in RAM; the self-check passed on the simulator's states for its own greedy text.
    expect(await readdir(dumpDir)).toEqual([]);
    const teacher = summary.selfCheck.checks.teacher!.figures as { agreement_next: number };
    expect(teacher.agreement_next).toBeGreaterThan(0.5);
    expect(summary.manifest.selfCheck.early).toMatch(/^3 samples, next-token agreement/);
    expect(summary.manifest.selfCheck.final).toMatch(/^6 samples, next-token agreement .* greedy 6\/6 exact/);
    expect(summary.totalTokens).toBe(index.reduce((s, r) => s + r.tokens, 0));
  }, 180_000);

  it('resumes by id: only a sample whose file was cut short is prefilled again, under its old index', async () => {
    const index = await readJsonl<{ i: number; id: string }>(join(dir, 'hs', 'index.jsonl'));
    const victim = index[3]!;
    const g = Math.floor(victim.i / 5) * 5;
    const file = join(dir, 'hs', `rows_${g}-${g + 5}`, `data_${victim.i}.ckpt`);
    await truncate(file, 100);
    const before = countPrefills(sim.log());
    const summary = await runExtract(job());
    expect(summary.counts).toEqual({ input: 12, ok: 12, error: 0, resumed: 11 });
    expect(countPrefills(sim.log()) - before).toBe(1);
    const after = await readJsonl<{ i: number; id: string }>(join(dir, 'hs', 'index.jsonl'));
    expect(after.filter((r) => r.id === victim.id).map((r) => r.i)).toEqual([victim.i]);
    expect(await readdir(dumpDir)).toEqual([]);
  }, 180_000);

  it('refuses to start when the destination cannot hold the exact token count', async () => {
    await expect(runExtract(job({ outDir: join(dir, 'hs-big'), hiddenSize: 2 ** 40 }))).rejects.toMatchObject({
      name: 'InsufficientSpaceError',
      message: expect.stringMatching(
        /extract needs .* tokens × \(8 × hidden 1099511627776 \+ 16\)\) in .* but only .* are free/,
      ),
    });
  }, 60_000);
});
