/**
 * `aerie compare` on two real runs, as a researcher makes them: the demo config run twice
 * through `aerie run` (real processes, a real Temporal dev server, the simulator), the second
 * with other deploy settings; then `aerie compare` on the two ids, its compare.html opened in
 * headless Chromium.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { AERIE_HOME } from '../../src/config/load.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { launchChromium } from '../support/browser.js';
import { run } from '../support/processes.js';
import { useTemporalSuite } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-compare-demo-');
const AERIE = join(AERIE_HOME, 'bin', 'aerie.mjs');

let chromium: Awaited<ReturnType<typeof launchChromium>> | undefined;
beforeAll(async () => {
  chromium = await launchChromium();
}, 60_000);
afterAll(async () => {
  await chromium?.close();
});

/** The demo config on this test's workdir and a free port, two benchmark levels, one round: quick, still a real run. */
async function demoVariant(name: string, steps: number): Promise<string> {
  const doc = YAML.parse(await readFile(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8')) as Record<string, any>;
  doc.hosts.local.workdir = join(suite.work, 'host');
  doc.server.port = await freePort();
  doc.stages.extract['dump-dir'] = join(suite.work, 'host', 'dumps');
  doc.stages.benchmark.concurrencies = [1, 4];
  doc.stages.benchmark.rounds = 1;
  doc.stages.benchmark['output-len'] = 32;
  doc.stages.deploy['num-steps'] = steps;
  doc.stages.deploy['num-draft-tokens'] = steps + 1;
  doc.run.label = name;
  const path = join(suite.work, `${name}.yaml`);
  await writeFile(path, YAML.stringify(doc));
  return path;
}

const env = () => ({
  TEMPORAL_ADDRESS: suite.t.server.address,
  TEMPORAL_NAMESPACE: 'default',
  AERIE_STATE_DIR: join(suite.work, 'state'),
});

async function aerieRun(config: string): Promise<string> {
  const r = await run(process.execPath, [AERIE, 'run', config], { cwd: suite.work, env: env(), timeoutMs: 240_000 });
  expect(r.code, r.stdout + r.stderr).toBe(0);
  return /^run (\S+)$/m.exec(r.stdout)![1]!;
}

describe('aerie compare on two demo runs', () => {
  it('lists the deploy settings that differ and opens as a page', async () => {
    const a = await aerieRun(await demoVariant('steps-three', 3));
    const b = await aerieRun(await demoVariant('steps-five', 5));
    const r = await run(process.execPath, [AERIE, 'compare', a, b], {
      cwd: suite.work,
      env: env(),
      timeoutMs: 60_000,
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    // The only settings that differ between the two configs (the label and the port are the run's, not the drafter's).
    expect(r.stdout).toMatch(/stages\.deploy\.num-steps.*3.*5/);
    expect(r.stdout).toMatch(/stages\.deploy\.num-draft-tokens.*4.*6/);
    expect(r.stdout).toContain('GPU-h');
    const html =
      /(\S+compare\.html)/.exec(r.stdout)?.[1] ?? join(suite.work, 'state', 'compare', `${a}--${b}`, 'compare.html');
    const page = await chromium!.browser.newPage();
    await page.goto(`file://${html.startsWith('/') ? html : join(suite.work, html)}`);
    expect(await page.locator('#simulated').isVisible()).toBe(true);
    expect(await page.locator('#about thead th').allTextContents()).toEqual(['', a, b]);
    expect(await page.locator('#levels tbody tr').count()).toBe(2);
    await page.close();
  }, 600_000);
});
