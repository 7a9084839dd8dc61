/**
 * The ways a capture goes wrong, each from the simulator's capture imitation
 * (AERIE_SIM_HS_FAULT, sim/sglang/capture.ts) or from a server without the capture: every one
 * fails with an error that names what disagrees, and loses nothing (no dump left in RAM, no
 * feature file counted that is not whole, good samples kept).
 */
import { mkdir, readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runExtract } from '../../src/stages/extract/server-driver.js';
import { type ExtractJob } from '../../src/stages/extract/server-job.js';
import { CAPTURE_FLAGS, captureSimEnv, readJsonl, useCaptureHost } from '../support/capture-sim.js';
import { startSim, stopSim, type Sim } from '../support/sim.js';

const ROOT = resolve(import.meta.dirname, '../..');
const MODEL = join(ROOT, 'examples/models/sim-llama-8b');

const cap = useCaptureHost('aerie-extfault-', 6, { concurrency: 3 });

const prefills = (log: string): number => (log.match(/"POST \/generate HTTP/g) ?? []).length;

/** One extraction against a simulator started for it, in folders of its own. */
async function extractWith(
  name: string,
  env: Record<string, string>,
  over: Partial<ExtractJob> = {},
  withPlugin = true,
) {
  const dumpDir = join(cap.dir, name, 'dumps');
  await mkdir(dumpDir, { recursive: true });
  const sim: Sim = await startSim(withPlugin ? captureSimEnv(cap.py.root, dumpDir, env) : env, CAPTURE_FLAGS);
  const outDir = join(cap.dir, name, 'hs');
  // SGLang's own warm-up request (its log's first POST /generate) comes before any of ours.
  const before = prefills(sim.log());
  const job: ExtractJob = {
    host: cap.host,
    baseUrl: sim.baseUrl,
    py: cap.py,
    samplesPath: cap.samples,
    dumpDir,
    outDir,
    modelPath: MODEL,
    hiddenSize: 512,
    chatTemplate: 'llama3',
    maxLength: 512,
    fileGroupSize: 2000,
    crossCheck: 'auto',
    trustRemoteCode: false,
    concurrency: 2,
    selfCheck: { samples: 2, finalSamples: 6, minAgreement: 0.5 },
    retries: 1,
    dumpWaitMs: 3000,
    convertBatch: 2,
    convertLingerMs: 50,
    ...over,
  };
  try {
    const result = await runExtract(job).then(
      (summary) => ({ summary, error: undefined }),
      (error: Error) => ({ summary: undefined, error }),
    );
    return { ...result, dumpDir, outDir, prefills: prefills(sim.log()) - before };
  } finally {
    await stopSim(sim);
  }
}

describe('capture faults fail with a clear error and lose nothing', () => {
  it.each([
    ['short-by-one', /short by one token: the last prompt token's state is missing/],
    ['tp-rank-1', /written by tp_rank 1; only rank 0's dump is read/],
    ['no-final', /no hidden_state tensor \(the final post-norm state was not captured\)/],
    ['error', /the capture refused/],
  ])(
    '%s on every request stops after the first samples, naming the fault',
    async (fault, says) => {
      const r = await extractWith(`all-${fault}`, { AERIE_SIM_HS_FAULT: fault });
      expect(r.error).toMatchObject({ name: 'EarlySamplesFailedError', message: expect.stringMatching(says) });
      expect(r.error!.message).toMatch(/all 2 first samples failed, so the extraction stops before the other 4/);
      // Only the first two were sent (each once, plus its retry for a refusal), and nothing is left in RAM.
      expect(r.prefills).toBeLessThanOrEqual(4);
      expect(await readdir(r.dumpDir)).toEqual([]);
    },
    120_000,
  );

  it('states one token off pass the converter but fail the self-check on the first samples, naming the misalignment', async () => {
    const r = await extractWith('shifted', { AERIE_SIM_HS_FAULT: 'shifted' });
    expect(r.error).toMatchObject({
      name: 'SelfCheckFailedError',
      message: expect.stringMatching(/self-check \(first samples\) failed .*teacher/),
    });
    expect(r.error!.message).toMatch(/predict/);
    expect(await readdir(r.dumpDir)).toEqual([]);
  }, 120_000);

  it('a server without the capture writes no dumps: the first samples fail, asking whether the capture is loaded', async () => {
    const r = await extractWith('no-plugin', {}, {}, false);
    expect(r.error).toMatchObject({
      name: 'EarlySamplesFailedError',
      message: expect.stringMatching(/is aerie's capture loaded in this server\?/),
    });
  }, 120_000);

  it("a fault in one request of three is that sample's error row; the others convert, and the self-check passes on them", async () => {
    const r = await extractWith('every-3', { AERIE_SIM_HS_FAULT: 'short-by-one', AERIE_SIM_HS_FAULT_EVERY: '3' });
    expect(r.error).toBeUndefined();
    const { counts } = r.summary!;
    expect(counts.input).toBe(6);
    expect(counts.error).toBe(2);
    expect(counts.ok).toBe(4);
    const errors = await readJsonl<{ id: string; error: string }>(join(r.outDir, 'extract_error.jsonl'));
    expect(errors.map((e) => e.error)).toEqual([
      expect.stringMatching(/^convert: fail: .*short by one token/),
      expect.stringMatching(/^convert: fail: .*short by one token/),
    ]);
    const index = await readJsonl<{ id: string }>(join(r.outDir, 'index.jsonl'));
    expect(index.map((x) => x.id).sort()).not.toContain(errors[0]!.id);
    expect(index).toHaveLength(4);
    expect(await readdir(r.dumpDir)).toEqual([]);
    // The refused samples are not self-check inputs.
    const kept = await readJsonl<{ id: string }>(join(r.outDir, 'selfcheck', 'ids.jsonl'));
    expect(kept.map((k) => k.id).sort()).toEqual(index.map((x) => x.id).sort());
  }, 120_000);
});
