// A report whose servers said they were the simulator says so in its title and on every chart;
// one whose records carry no such word (a GPU run, or a results.jsonl from before) does not.
import { describe, expect, it } from 'vitest';
import { chartSpecs, renderCharts } from '../../src/bench/charts.js';
import { renderReportHtml } from '../../src/bench/html.js';
import { renderReportMarkdown, renderReportTable } from '../../src/bench/report.js';
import { simulatorOf } from '../../src/bench/simulated.js';
import { LEVELS, record, sweepInput } from './report-fixture.js';

const sim = 'aerie-sim 0.5.23';
const simulated = {
  ...sweepInput,
  baseline: LEVELS.map((c) => ({ ...record(c, 100 * c, null), server_simulated: sim })),
  speculative: LEVELS.map((c) => ({ ...record(c, 200 * c, 3), server_simulated: sim })),
};

describe('SIMULATED label', () => {
  it("is read from the server's own /server_info marker, nothing else", () => {
    expect(simulatorOf({ version: '0.5.23', aerie_sim: { name: 'aerie-sim', release: '0.5.23' } })).toBe(sim);
    expect(simulatorOf({ version: '0.5.23', model_path: '/x/aerie-sim' })).toBeNull();
    expect(simulatorOf(undefined)).toBeNull();
  });

  it('leads the title of report.md, the terminal table and report.html, and is drawn on every chart', async () => {
    expect(renderReportMarkdown(simulated).split('\n')[0]).toBe(
      `# SIMULATED (${sim}, not a GPU measurement): ${sweepInput.title}`,
    );
    expect(renderReportTable(simulated).split('\n')[0]).toMatch(/^SIMULATED \(aerie-sim 0\.5\.23/);
    const specs = chartSpecs(simulated);
    expect(specs).toHaveLength(5);
    for (const s of specs) {
      expect(s.title).toMatch(/^SIMULATED: /);
      expect((s.spec as { title?: { text: string } }).title?.text).toBe(`SIMULATED (${sim})`);
    }
    const charts = await renderCharts(simulated);
    for (const c of charts) expect(c.svg).toContain('SIMULATED');
    const html = renderReportHtml(simulated, charts, { generatedAt: 'now' });
    expect(html).toContain('<p class="simulated" id="simulated">SIMULATED');
    expect(html).toContain('<title>SIMULATED (aerie-sim 0.5.23');
  }, 60_000);

  it('is absent when no record says so', () => {
    expect(renderReportMarkdown(sweepInput).split('\n')[0]).toBe(`# ${sweepInput.title}`);
    for (const s of chartSpecs(sweepInput)) expect((s.spec as { title?: unknown }).title).toBeUndefined();
  });
});
