/**
 * report.html in a real browser: Debian's Chromium, headless, driven by playwright-core.
 * The file is opened from disk with no network, a screenshot is taken, and every chart
 * must be an inline SVG that the browser laid out with a size and drew marks into.
 */
import { access, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderReport } from '../../src/bench/report-files.js';
import { sweepInput } from '../bench/report-fixture.js';
import { useWorkdir } from '../support/workdir.js';

const CHROMIUM = '/usr/bin/chromium';
const tmp = useWorkdir('aerie-report-html-');
let browser: BrowserContext | undefined;

beforeAll(async () => {
  await access(CHROMIUM).catch(() => {
    throw new Error(`${CHROMIUM} is missing: run scripts/setup.sh --test (apt-get install chromium)`);
  });
  const report = await renderReport(sweepInput, '2026-01-01T00:00:00Z');
  for (const [name, text] of Object.entries(report.files)) await writeFile(join(tmp.path, name), text);
  // A fresh profile per run; the flags keep Chromium from phoning home or prompting.
  browser = await chromium.launchPersistentContext(join(tmp.path, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-sync',
    ],
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
});

describe('report.html in headless Chromium', () => {
  it('opens from disk without network requests, and its five charts render as non-empty SVGs', async () => {
    const page = await browser!.newPage();
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(pathToFileURL(join(tmp.path, 'report.html')).href, { waitUntil: 'load' });

    const shot = join(tmp.path, 'report.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect((await stat(shot)).size).toBeGreaterThan(50_000);

    const charts = await page.$$eval('figure[data-chart]', (figs) =>
      figs.map((f) => {
        const svg = f.querySelector('svg');
        const box = svg?.getBoundingClientRect();
        const lines = [...(svg?.querySelectorAll('.mark-line.role-mark path') ?? [])].map((p) =>
          (p as unknown as { getTotalLength(): number }).getTotalLength(),
        );
        return {
          id: f.getAttribute('data-chart'),
          width: box?.width ?? 0,
          height: box?.height ?? 0,
          lineLengths: lines,
          points: svg?.querySelectorAll('.mark-symbol.role-mark path').length ?? 0,
          text: svg?.textContent ?? '',
        };
      }),
    );
    expect(charts.map((c) => c.id)).toEqual(['throughput', 'speedup', 'accept-length', 'ttft', 'itl']);
    for (const c of charts) {
      expect(c.width, c.id!).toBeGreaterThan(300);
      expect(c.height, c.id!).toBeGreaterThan(200);
      expect(c.lineLengths.length, c.id!).toBeGreaterThan(0);
      for (const len of c.lineLengths) expect(len, c.id!).toBeGreaterThan(50);
      expect(c.points, c.id!).toBeGreaterThanOrEqual(8);
      expect(c.text, c.id!).toContain('concurrency (requests in flight)');
    }
    // two series with eight levels each where both variants are drawn
    expect(charts.find((c) => c.id === 'throughput')!.points).toBe(16);
    expect(await page.locator('table').first().locator('tbody tr').count()).toBe(8);
    expect(requests.filter((u) => !u.startsWith('file:'))).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();
  });
});
