/**
 * `aerie sweep` from the CLI on the demo config (real processes, a real Temporal dev server, the
 * simulator): two variants that differ in a train setting share generate and extract, which the
 * histories of the parent and its children show scheduled once each; both variants finish; the
 * comparison report names both and marks a best; and the dev server's Web UI, in headless
 * Chromium, shows the sweep's parent with its children.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { AERIE_HOME } from '../../src/config/load.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { AerieStage } from '../../src/workflows/index.js';
import { launchChromium } from '../support/browser.js';
import { run } from '../support/processes.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-sweep-');
const AERIE = join(AERIE_HOME, 'bin', 'aerie.mjs');

let chromium: Awaited<ReturnType<typeof launchChromium>> | undefined;
beforeAll(async () => {
  chromium = await launchChromium();
}, 60_000);
afterAll(async () => {
  await chromium?.close();
});

/** The demo config on this test's workdir and a free port, two benchmark levels, one round. */
async function demoBase(name = 'base', tweak: (doc: Record<string, any>) => void = () => undefined): Promise<string> {
  const doc = YAML.parse(await readFile(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8')) as Record<string, any>;
  doc.hosts.local.workdir = join(suite.work, 'host');
  doc.server.port = await freePort();
  doc.stages.extract['dump-dir'] = join(suite.work, 'host', 'dumps');
  doc.stages.benchmark.concurrencies = [1, 4];
  doc.stages.benchmark.rounds = 1;
  doc.stages.benchmark['output-len'] = 32;
  doc.run.label = 'sweep-e2e';
  tweak(doc);
  const path = join(suite.work, `${name}.yaml`);
  await writeFile(path, YAML.stringify(doc));
  return path;
}

const env = () => ({
  TEMPORAL_ADDRESS: suite.t.server.address,
  TEMPORAL_NAMESPACE: 'default',
  AERIE_STATE_DIR: join(suite.work, 'state'),
});

/** Activity types scheduled in one workflow's history, and the child workflows it started. */
async function historyOf(client: Client, workflowId: string): Promise<{ activities: string[]; children: string[] }> {
  const h = await client.workflow.getHandle(workflowId).fetchHistory();
  const activities: string[] = [];
  const children: string[] = [];
  for (const e of h.events ?? []) {
    const a = e.activityTaskScheduledEventAttributes?.activityType?.name;
    if (a) activities.push(a);
    const c = e.childWorkflowExecutionStartedEventAttributes?.workflowExecution?.workflowId;
    if (c) children.push(c);
  }
  return { activities, children };
}

describe('aerie sweep on the demo', () => {
  it('shares generate and extract between two train variants, reports both with a best, and the Web UI shows the parent with its children', async () => {
    const r = await run(process.execPath, [AERIE, 'sweep', await demoBase(), '--vary', 'stages.train.num-epochs=1,2'], {
      cwd: suite.work,
      env: env(),
      timeoutMs: 300_000,
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const [, sweepId, parentId] = /^sweep (\S+) \(workflow (\S+)\)$/m.exec(r.stdout)!;
    expect(r.stdout).toContain('shared: generate, extract computed once for all variants');
    expect(r.stdout).toMatch(/^variant num-epochs=1: run \S+ completed/m);
    expect(r.stdout).toMatch(/^variant num-epochs=2: run \S+ completed/m);

    // From the histories: the shared run and the two variants are the parent's children, and
    // generate and extract ran once across all of them.
    const parent = await historyOf(suite.t.client, parentId!);
    expect(parent.children.sort()).toEqual([`${sweepId}-shared`, `${sweepId}-v1`, `${sweepId}-v2`]);
    const all = [parent, ...(await Promise.all(parent.children.map((id) => historyOf(suite.t.client, id))))];
    const count = (type: string) => all.flatMap((h) => h.activities).filter((a) => a === type).length;
    expect(count('generateData')).toBe(1);
    expect(count('extractHiddenStates')).toBe(1);
    expect(count('trainDrafter')).toBe(2);
    const v1 = await historyOf(suite.t.client, `${sweepId}-v1`);
    expect(v1.activities).not.toContain('generateData');
    expect(v1.activities).toContain('benchmarkSweep');

    // aerie status on the sweep: each child run and its state, without a worker.
    const st = await run(process.execPath, [AERIE, 'status', sweepId!], {
      cwd: suite.work,
      env: env(),
      timeoutMs: 60_000,
    });
    expect(st.code, st.stdout + st.stderr).toBe(0);
    expect(st.stdout).toContain(`sweep ${sweepId}: completed`);
    expect(st.stdout).toMatch(new RegExp(`shared \\(to extract\\) +${sweepId}-shared  completed`));
    expect(st.stdout).toMatch(new RegExp(`num-epochs=2 +${sweepId}-v2  completed`));

    // The report: both variants named, a best marked, and its definition.
    const dir = join(suite.work, 'state', 'sweeps', sweepId!);
    const md = await readFile(join(dir, 'sweep.md'), 'utf8');
    for (const label of ['num-epochs=1', 'num-epochs=2']) expect(md).toContain(label);
    expect(md).toMatch(/\*\*Best overall: num-epochs=[12]\*\*/);
    expect(md).toContain('★ best overall');
    expect(md).toContain('geometric mean');
    expect(md).toMatch(/stages\.train\.num-epochs \| 1 \| 2/);
    const page = await chromium!.browser.newPage({ viewport: { width: 1600, height: 2000 } });
    await page.goto(`file://${join(dir, 'sweep.html')}`);
    expect(await page.locator('#variants tbody tr').count()).toBe(2);
    expect(await page.locator('#best-overall').innerText()).toMatch(/Best overall: num-epochs=[12]/);
    expect(await page.locator('#levels tbody tr').count()).toBe(2);
    expect(await page.locator('#throughput tbody tr').count()).toBe(2);

    // The Web UI: the parent's Relationships tab lists its children, and each child's page names its parent.
    const ui = `http://127.0.0.1:${suite.t.server.uiPort}/namespaces/default`;
    await page.goto(`${ui}/workflows/${encodeURIComponent(parentId!)}`);
    await page.getByText('drafterSweep').first().waitFor({ timeout: 60_000 });
    await page
      .getByRole('link', { name: /Relationships/ })
      .or(page.getByRole('tab', { name: /Relationships/ }))
      .first()
      .click();
    await page.waitForURL(/relationships/, { timeout: 30_000 });
    for (const child of parent.children) {
      await page.getByRole('link', { name: child, exact: true }).first().waitFor({ timeout: 60_000 });
    }
    await page.screenshot({ path: join(suite.work, 'sweep-relationships.png') });
    for (const child of parent.children) {
      await page.goto(`${ui}/workflows/${encodeURIComponent(child)}`);
      await page.getByText('Parent Workflow').first().waitFor({ timeout: 60_000 });
      await page.getByRole('link', { name: parentId! }).first().waitFor({ timeout: 60_000 });
    }
    await page.close();
  }, 420_000);

  it('aerie cancel <sweep> cancels every run of the sweep, and nothing it launched is left running', async () => {
    // Training slowed down so the cancel lands while a variant trains.
    const base = await demoBase('slow-train', (doc) => {
      doc.run.label = 'sweep-cancel';
      doc.stages.train.env.AERIE_SIM_TIME_SCALE = '1';
    });
    const sweep = run(process.execPath, [AERIE, 'sweep', base, '--vary', 'stages.train.num-epochs=3,4'], {
      cwd: suite.work,
      env: env(),
      timeoutMs: 300_000,
    });
    const client = suite.t.client;
    const parentId = await waitUntil(
      async () => {
        for await (const w of client.workflow.list({
          query: `WorkflowType="drafterSweep" AND ExecutionStatus="Running"`,
        }))
          return w.workflowId;
        return undefined;
      },
      'the sweep to start',
      60_000,
    );
    const sweepId = parentId.replace(/^aerie-sweep-/, '');
    await waitUntil(
      async () => {
        for (const v of ['v1', 'v2']) {
          const d = await client.workflow
            .getHandle(`${sweepId}-${v}`)
            .describe()
            .catch(() => undefined);
          if (d?.typedSearchAttributes.get(AerieStage) === 'train') return true;
        }
        return false;
      },
      'a variant to be training',
      180_000,
    );
    const c = await run(process.execPath, [AERIE, 'cancel', sweepId], {
      cwd: suite.work,
      env: env(),
      timeoutMs: 120_000,
    });
    expect(c.code, c.stdout + c.stderr).toBe(0);
    expect(c.stdout).toContain(`cancel requested for sweep ${sweepId}`);
    const r = await sweep;
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`sweep ${sweepId} cancelled`);
    for (const v of ['v1', 'v2']) {
      expect((await client.workflow.getHandle(`${sweepId}-${v}`).describe()).status.name).toBe('CANCELLED');
    }
    // The training job the cancel interrupted was launched (its record is there) and is gone.
    const host = suite.hostAt('host');
    const launches = await host.listLaunches();
    const trains = launches
      .map((l) => l.launchId)
      .filter((id) => id.startsWith(`${sweepId}-v`) && id.includes('train'));
    expect(trains).not.toEqual([]);
    const alive = [];
    for (const rec of launches) if ((await host.procStatus(rec)).state === 'alive') alive.push(rec.launchId);
    expect(alive).toEqual([]);
  }, 420_000);
});
