/**
 * The stock-server producer against the simulator's imitation of stock SGLang 0.5.23
 * (sim/sglang/stock.ts): the aux pass on one launch, the final pass on a second, aerie's client
 * running on the host, then the same converter and self-check as the capture's. The feature
 * files must hold the same states the capture plugin writes for the same ids.
 */
import { mkdir, readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderServerArgv } from '../../src/sglang/launch-argv.js';
import { runExtract } from '../../src/stages/extract/server-driver.js';
import { type ExtractJob } from '../../src/stages/extract/server-job.js';
import { runStockAux } from '../../src/stages/extract/stock-server.js';
import { DRAFT_IDS, readJsonl, useCaptureHost } from '../support/capture-sim.js';
import { startSim, stopSim } from '../support/sim.js';

const ROOT = resolve(import.meta.dirname, '../..');
const MODEL = join(ROOT, 'examples/models/sim-llama-8b');

/** The flags aerie renders for each stock pass (after the common part of the line). */
const flags = (mode: 'stock-aux' | 'stock-final') =>
  renderServerArgv({
    launcher: ['sim'],
    modelPath: 'm',
    port: 1,
    tpSize: 1,
    extraArgs: [],
    extraction: true,
    capture: { sglangVersion: '0.5.23', draftLayerIds: DRAFT_IDS, mode },
  }).slice(9);

const cap = useCaptureHost('aerie-extstock-', 8);

describe('stock SGLang in two passes', () => {
  it('writes one SpecForge file per sample from the aux and final passes, and passes the self-check', async () => {
    const outDir = join(cap.dir, 'hs');
    const dumpDir = join(outDir, '.stock');
    await mkdir(dumpDir, { recursive: true });
    const job = (baseUrl: string, port: number): ExtractJob & { stock: NonNullable<ExtractJob['stock']> } => ({
      host: cap.host,
      baseUrl,
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
      concurrency: 4,
      selfCheck: { samples: 2, finalSamples: 8, minAgreement: 0.5 },
      convertBatch: 4,
      convertLingerMs: 50,
      stock: { address: '127.0.0.1', port, concurrency: 4, batch: 3, captureIds: DRAFT_IDS.map((x) => x + 1) },
    });
    const aux = await startSim({}, flags('stock-aux'));
    let auxSummary;
    try {
      auxSummary = await runStockAux(job(aux.baseUrl, Number(new URL(aux.baseUrl).port)));
    } finally {
      await stopSim(aux);
    }
    expect(auxSummary).toEqual({ samples: 8, ready: 8, errors: 0 });
    expect((await readdir(dumpDir)).filter((n) => n.endsWith('.aux.partial'))).toHaveLength(8);

    const final = await startSim({}, flags('stock-final'));
    try {
      const summary = await runExtract(job(final.baseUrl, Number(new URL(final.baseUrl).port)));
      expect(summary.counts).toEqual({ input: 8, ok: 8, error: 0, resumed: 0 });
      expect(summary.manifest.selfCheck.final).toMatch(/^8 samples, next-token agreement .* greedy 8\/8 exact/);
    } finally {
      await stopSim(final);
    }
    const index = await readJsonl<{ i: number; id: string }>(join(outDir, 'index.jsonl'));
    expect(index.map((r) => r.i).sort((a, b) => a - b)).toEqual([...Array(8).keys()]);
    // Parts merged and converted: nothing waits in the folder.
    expect((await readdir(dumpDir)).filter((n) => !n.startsWith('.'))).toEqual([]);
  }, 240_000);

  it('refuses a stock pass on a release without the aux flag', () => {
    expect(() =>
      renderServerArgv({
        launcher: ['sim'],
        modelPath: 'm',
        port: 1,
        tpSize: 1,
        extraArgs: [],
        extraction: true,
        capture: { sglangVersion: '0.5.12', draftLayerIds: DRAFT_IDS, mode: 'stock-aux' },
      }),
    ).toThrow(/only from 0.5.23 .* use stages.extract.driver: patched-server/);
  });
});
