// `aerie compare`: two runs with different deploy settings side by side, in Markdown and in an
// HTML file checked in headless Chromium (test/support/browser.ts).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderResultsJsonl } from '../../src/bench/report-files.js';
import { aggregateRounds } from '../../src/bench/rounds.js';
import { compareCommand, differingSettings } from '../../src/cli/compare.js';
import { launchChromium } from '../support/browser.js';
import { useWorkdir } from '../support/workdir.js';
import { LEVELS, record } from '../bench/report-fixture.js';

const wd = useWorkdir('aerie-compare-');

/** A level of 3 rounds whose throughputs spread ±10 % around `out`. */
const level = (c: number, out: number, accept: number | null, simulated: string | null) =>
  aggregateRounds([0.9, 1, 1.1].map((f) => ({ ...record(c, out * f, accept), server_simulated: simulated })));

async function writeRun(root: string, id: string, steps: number, slowFrom: number, gpuHours: number): Promise<void> {
  const dir = join(root, id);
  await mkdir(dir, { recursive: true });
  const sim = 'aerie-sim 0.5.23';
  await writeFile(
    join(dir, 'results.jsonl'),
    renderResultsJsonl({
      baseline: LEVELS.map((c) => level(c, 100 * Math.min(c, 64), null, sim)),
      speculative: LEVELS.map((c) => level(c, (c < slowFrom ? 220 : 60) * Math.min(c, 64), 3.1, sim)),
    }),
  );
  await writeFile(
    join(dir, 'config.yaml'),
    `run:\n  label: demo\nstages:\n  generate:\n    input: data/prompts.jsonl\n  deploy:\n    speculative-algorithm: EAGLE3\n    num-steps: ${steps}\n    eagle-topk: 1\n    num-draft-tokens: ${steps + 1}\n`,
  );
  await writeFile(
    join(dir, 'result.json'),
    JSON.stringify({ report: { summary: { cost: { totalGpuHours: gpuHours, stages: [], launches: [], basis: '' } } } }),
  );
}

let chromium: Awaited<ReturnType<typeof launchChromium>> | undefined;
beforeAll(async () => {
  await writeRun(join(wd.path, 'runs'), 'run-a', 3, 70, 0.25);
  await writeRun(join(wd.path, 'runs'), 'run-b', 5, 30, 0.5);
  chromium = await launchChromium();
}, 60_000);
afterAll(async () => {
  await chromium?.close();
});

describe('aerie compare', () => {
  it('lists only the settings that differ', () => {
    expect(differingSettings([{ a: { b: 1, c: 2 } }, { a: { b: 1, c: 3, d: [1] } }])).toEqual(['a.c', 'a.d']);
  });

  it('prints and writes the runs side by side: settings that differ, crossover, GPU-hours, speedup per level', async () => {
    let printed = '';
    const outDir = join(wd.path, 'out');
    const code = await compareCommand(['run-a', 'run-b'], {
      out: { write: (s: string) => (printed += s) },
      folderOf: (id) => join(wd.path, 'runs', id),
      outDir,
    });
    expect(code).toBe(0);
    const md = await readFile(join(outDir, 'compare.md'), 'utf8');
    expect(printed).toContain(md);
    expect(md).toContain('# SIMULATED (at least one run was on the simulator): aerie compare run-a vs run-b');
    expect(md).toContain('| stages.deploy.num-steps | 3 | 5 |');
    expect(md).toContain('| stages.deploy.num-draft-tokens | 4 | 6 |');
    expect(md).not.toContain('| run.label |');
    expect(md).toContain('| GPU-hours | 0.250 GPU-h | 0.500 GPU-h |');
    // run-a: 2.2× up to 30, 0.6× from 70: 30 × (70/30)^0.75 ≈ 56.6; run-b from 30: 10 × 3^0.75 ≈ 22.8.
    expect(md).toContain('| Crossover | ≈ 57; --max-running-requests 56 | ≈ 23; --max-running-requests 22 |');
    // Paired rounds of equal spread: the ratio is the same in each round, so its interval is a point.
    // The fixture's records carry no verify counts: the pooled column is the server's average (accept − 0.1).
    expect(md).toContain('| 1 | 2.20× [2.20–2.20] | 3.00 / 3.10 | 2.20× [2.20–2.20] | 3.00 / 3.10 |');
    expect(md).toContain('| 250 | 0.60× [0.60–0.60] |');
  });

  it('compare.html opens in Chromium with the SIMULATED banner and both tables laid out', async () => {
    const page = await chromium!.browser.newPage();
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(`file://${join(wd.path, 'out', 'compare.html')}`);
    expect(await page.locator('#simulated').isVisible()).toBe(true);
    expect(await page.locator('#about thead th').allTextContents()).toEqual(['', 'run-a', 'run-b']);
    expect(await page.locator('#levels tbody tr').count()).toBe(LEVELS.length);
    const box = await page.locator('#levels').boundingBox();
    expect(box!.width).toBeGreaterThan(300);
    expect(requests.every((u) => u.startsWith('file://'))).toBe(true);
    await page.close();
  });

  it('refuses fewer than two runs and a run without results', async () => {
    let printed = '';
    const out = { write: (s: string) => (printed += s) };
    expect(await compareCommand(['run-a'], { out })).toBe(2);
    expect(await compareCommand(['run-a', 'nope'], { out, folderOf: (id) => join(wd.path, 'runs', id) })).toBe(1);
    expect(printed).toContain('run nope: no results.jsonl');
  });
});
