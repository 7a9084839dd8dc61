/**
 * The history a person reads: the dev server's own Web UI, in headless Chromium, finds the
 * run by its search attribute and shows each stage's activities with their summary lines
 * and the live stage table as the workflow's current details.
 */
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { HostPool } from '../../src/hosts/index.js';
import { TASK_QUEUE } from '../../src/shared.js';
import { AerieLabel, pipeline } from '../../src/workflows/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { createWorker } from '../../src/worker.js';
import { launchChromium } from '../support/browser.js';
import { demoConfig } from '../support/demo-config.js';
import { useTemporalSuite } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-ui-');

async function waitForFrameTable(page: Page, containing: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const frame of page.frames()) {
      const tables = frame.locator('table').filter({ hasText: containing });
      if ((await tables.count().catch(() => 0)) > 0) return tables.first().innerText();
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`no table containing "${containing}" appeared within ${timeoutMs / 1000} s`);
}

describe('Temporal Web UI', () => {
  it('lists the run by label and shows activity summaries and the stage table', async () => {
    const config = demoConfig(join(suite.work, 'host'), await freePort(), (c) => {
      c.stages.benchmark.concurrencies = [1, 4];
      c.run.label = 'ui-check';
    });
    const runId = `ui-${Date.now()}`;
    const hosts = new HostPool();
    const { worker } = await createWorker({
      connection: suite.t.nativeConnection,
      workflowBundle: suite.t.bundle,
      hosts,
    });
    const chrome = await launchChromium();
    // The worker stays up while the page loads: current details are read through it.
    await worker.runUntil(async () => {
      await suite.t.client.workflow.execute(pipeline, {
        taskQueue: TASK_QUEUE,
        workflowId: runId,
        args: [{ runId, config, configPath: 'test' }],
        typedSearchAttributes: [{ key: AerieLabel, value: 'ui-check' }],
        staticSummary: 'EAGLE-3 drafter for sim-llama-8b (ui-check)',
      });
      const ui = `http://127.0.0.1:${suite.t.server.uiPort}/namespaces/default`;
      const page = await chrome.browser.newPage({ viewport: { width: 1600, height: 2400 } });

      await page.goto(`${ui}/workflows?query=${encodeURIComponent('AerieLabel="ui-check"')}`);
      await page.getByText(runId, { exact: true }).first().waitFor({ timeout: 60_000 });

      await page.goto(`${ui}/workflows/${encodeURIComponent(runId)}`);
      for (const summary of [
        'preflight: hosts, interpreter, ports, drafter config',
        'launch sglang target tp=1 on local:',
        "extract hidden states (aerie's capture in SGLang, dumps in",
        'train EAGLE-3 drafter (specforge, 2 epochs)',
        'launch sglang EAGLE3 tp=1 on local:',
        'acceptance gate: accept length ≥ 1.3',
        'benchmark eagle3: concurrency 1/4',
      ]) {
        await page.getByText(summary).first().waitFor({ timeout: 60_000 });
      }
      await page.screenshot({ path: join(suite.work, 'timeline.png') });

      await page.getByText('User Metadata').click();
      await page.getByText('Current Details').waitFor({ timeout: 30_000 });
      // The UI renders Markdown details in a sandboxed frame: look for the stage table in every frame.
      const text = await waitForFrameTable(page, 'benchmark', 60_000);
      for (const stage of ['preflight', 'generate', 'extract', 'train', 'deploy', 'benchmark'])
        expect(text).toContain(stage);
      expect(text.match(/\bdone\b/g)?.length).toBe(6);
      await page.close();
    });
    await chrome.close();
    await hosts.closeAll();
  }, 240_000);
});
