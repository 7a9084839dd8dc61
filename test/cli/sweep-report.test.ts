// A sweep's report: the best variant per level (highest median speedup) and overall (highest
// geometric mean over the levels every completed variant measured), marked in compare's tables
// headed by the variants' labels, with throughput per level (golden rows); a failed variant listed without figures.
import { describe, expect, it } from 'vitest';
import type { RunView } from '../../src/cli/compare.js';
import { bestOf, buildSweepReport, renderSweepHtml, renderSweepMarkdown } from '../../src/cli/sweep-report.js';
import { record } from '../bench/report-fixture.js';

/** One round per level: speedup = spec ÷ base throughput. */
function view(runId: string, speedups: Record<number, number>, epochs: number): RunView {
  const levels = Object.keys(speedups).map(Number);
  return {
    runId,
    config: { stages: { train: { 'num-epochs': epochs } } },
    baseline: levels.map((c) => ({ ...record(c, 100, null), server_simulated: null })),
    speculative: levels.map((c) => ({ ...record(c, 100 * speedups[c]!, 3), server_simulated: null })),
    cost: null,
  };
}

describe('sweep report', () => {
  // a wins at 1, b at 4 and 16; a's geometric mean (2·1.2·1.1)^(1/3) ≈ 1.38 < b's (1.5·1.5·1.5) = 1.5.
  const a = view('run-a', { 1: 2, 4: 1.2, 16: 1.1 }, 1);
  const b = view('run-b', { 1: 1.5, 4: 1.5, 16: 1.5, 64: 0.9 }, 2);

  it('picks the best per level and overall over the levels every variant measured', () => {
    const best = bestOf([
      { label: 'num-epochs=1', view: a },
      { label: 'num-epochs=2', view: b },
    ]);
    expect(best.perLevel.map((p) => `${p.concurrency}:${p.label}:${p.speedup}`)).toEqual([
      '1:num-epochs=1:2',
      '4:num-epochs=2:1.5',
      '16:num-epochs=2:1.5',
      '64:num-epochs=2:0.9',
    ]);
    expect(best.overall?.label).toBe('num-epochs=2');
    expect(best.overall?.levels).toEqual([1, 4, 16]);
    expect(best.overall?.geomean).toBeCloseTo(1.5, 6);
  });

  it('renders the variants, the marked levels and the definition (golden rows)', () => {
    const input = {
      sweepId: 'sw-1',
      configPath: '/x/base.yaml',
      shared: { reason: 'generate, extract computed once for all variants', runId: 'sw-1-shared' },
      variants: [
        { label: 'num-epochs=1', runId: 'sw-1-v1', state: 'completed', view: a },
        { label: 'num-epochs=2', runId: 'sw-1-v2', state: 'completed', view: b },
        { label: 'num-epochs=3', runId: 'sw-1-v3', state: 'failed', error: 'train failed: the trainer crashed\nlog…' },
      ],
    };
    const r = buildSweepReport(input);
    const md = renderSweepMarkdown(input, r);
    expect(md).toContain('**Best overall: num-epochs=2** (geometric-mean speedup 1.50× over concurrency 1, 4, 16).');
    expect(md).toContain('| num-epochs=1 | sw-1-v1 | completed | 1.38× |  |');
    expect(md).toContain('| num-epochs=2 | sw-1-v2 | completed | 1.50× | ★ best overall |');
    expect(md).toContain('| num-epochs=3 | sw-1-v3 | failed: train failed: the trainer crashed | — |  |');
    expect(md).toContain('| stages.train.num-epochs | 1 | 2 |');
    expect(md).toContain('| 1 | 2.00× ★ | 2.90 / 3.00 | 1.50× | 2.90 / 3.00 |');
    expect(md).toContain('| 4 | 1.20× | 2.90 / 3.00 | 1.50× ★ | 2.90 / 3.00 |');
    expect(md).toContain('| 64 | — | — | 0.90× ★ | 2.90 / 3.00 |');
    expect(md).toContain(
      '| Concurrency | num-epochs=1 EAGLE3 / target alone (tok/s) | num-epochs=2 EAGLE3 / target alone (tok/s) |',
    );
    expect(md).toContain('| 1 | 200 / 100 | 150 / 100 |');
    expect(md).toContain('| 64 | — | 90 / 100 |');
    expect(md).toContain('Shared: generate, extract computed once for all variants (run sw-1-shared).');
    expect(md).toContain('highest geometric mean');
    const html = renderSweepHtml(input, r);
    expect(html).toContain('<p id="best-overall"><strong>Best overall: num-epochs=2</strong>');
    expect(html).toContain('<table id="variants">');
    expect(html).toContain('<table id="throughput">');
  });
});
