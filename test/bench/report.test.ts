import { describe, expect, it } from 'vitest';
import type { BenchServingRecord } from '../../src/bench/metrics.js';
import { DETAIL_HEADERS, METRIC_DEFINITIONS, pairByConcurrency, renderReportMarkdown, renderReportTable, speedup } from '../../src/bench/report.js';

const rec = (c: number, out: number, p: Partial<BenchServingRecord> = {}): BenchServingRecord =>
  ({
    max_concurrency: c,
    output_throughput: out,
    p99_ttft_ms: 100 + c,
    p99_itl_ms: 10 + c / 10,
    accept_length: null,
    mean_accept_length_per_request: null,
    errors: 0,
    error_samples: [],
    completed: 16,
    ...p,
  }) as BenchServingRecord;

const baseline = [rec(10, 1000), rec(1, 158)];
const speculative = [
  rec(1, 373, { mean_accept_length_per_request: 3.456, accept_length: 3.1, p99_ttft_ms: 95.25 }),
  rec(10, 1380, { accept_length: 2.9, errors: 2, completed: 18, error_samples: ['HTTP 503: overloaded'] }),
  rec(30, 2500, { mean_accept_length_per_request: 2.5 }),
];
const input = { title: 'Llama-3.1-8B + EAGLE3, MT-Bench', baseline, speculative, notes: ['1×H100, SGLang 0.5.2.'] };

describe('report', () => {
  it('pairs by concurrency and computes speedup = speculative / baseline output throughput', () => {
    const rows = pairByConcurrency(input);
    expect(rows.map((r) => r.concurrency)).toEqual([1, 10, 30]);
    expect(speedup(rows[0])).toBeCloseTo(373 / 158, 12);
    expect(speedup(rows[2])).toBeUndefined();
  });

  it('renders the Markdown comparison table (golden), then settings, every level per variant and the definitions', () => {
    const md = renderReportMarkdown({ ...input, settings: ['Load: aerie closed loop.'] });
    const comparison = [
      '# Llama-3.1-8B + EAGLE3, MT-Bench',
      '',
      '| Concurrency | Baseline out tok/s | EAGLE3 out tok/s | Speedup | Accept length | Baseline p99 TTFT (ms) | EAGLE3 p99 TTFT (ms) | Baseline p99 ITL (ms) | EAGLE3 p99 ITL (ms) |',
      '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      '| 1 | 158.0 | 373.0 | 2.36× | 3.46 | 101.0 | 95.3 | 10.1 | 10.1 |',
      '| 10 | 1000.0 | 1380.0 | 1.38× | 2.90 | 110.0 | 110.0 | 11.0 | 11.0 |',
      '| 30 | — | 2500.0 | — | 2.50 | — | 130.0 | — | 13.0 |',
      '',
      'Speedup = EAGLE3 output tok/s ÷ baseline output tok/s at the same concurrency. Accept length = mean of per-request meta_info values (server average when absent).',
      '',
      '- Concurrency 10, EAGLE3: 2 of 20 requests failed (e.g. HTTP 503: overloaded); figures cover the successful ones only.',
      '- 1×H100, SGLang 0.5.2.',
      '',
      '## Settings',
      '',
      '- Load: aerie closed loop.',
      '',
      '## EAGLE3: every level',
      '',
      '',
    ].join('\n');
    expect(md.startsWith(comparison)).toBe(true);
    const rest = md.slice(comparison.length).split('\n');
    expect(rest[0]).toBe(`| ${DETAIL_HEADERS.join(' | ')} |`);
    // rows sorted by concurrency: 1, 10, 30 for EAGLE3; then the baseline's 1, 10
    expect(rest.slice(2, 5).map((l) => l.split(' | ')[0])).toEqual(['| 1', '| 10', '| 30']);
    expect(rest[2]).toContain('| 3.46 |');
    expect(rest[3]).toMatch(/^\| 10 \| 18 \| 2 \|/);
    expect(rest[6]).toBe('## Baseline: every level');
    expect(rest.slice(10, 12).map((l) => l.split(' | ')[0])).toEqual(['| 1', '| 10']);
    expect(md.trimEnd().endsWith(METRIC_DEFINITIONS)).toBe(true);
  });

  it('renders the fixed-width terminal table (golden)', () => {
    expect(renderReportTable({ title: 'Smoke', speculative: [rec(1, 42.25, { accept_length: 1.5 })] })).toBe(
      [
        'Smoke',
        '',
        'Concurrency  Baseline out tok/s  EAGLE3 out tok/s  Speedup  Accept length  Baseline p99 TTFT (ms)  EAGLE3 p99 TTFT (ms)  Baseline p99 ITL (ms)  EAGLE3 p99 ITL (ms)',
        '-----------  ------------------  ----------------  -------  -------------  ----------------------  --------------------  ---------------------  -------------------',
        '          1                   —              42.3        —           1.50                       —                 101.0                      —                 10.1',
        '',
      ].join('\n'),
    );
  });

  it('aligns every terminal row to the header width and uses the speculative label', () => {
    const out = renderReportTable({ ...input, speculativeLabel: 'EAGLE3-topk1' });
    const lines = out.split('\n').slice(2, 7);
    expect(lines[0]).toContain('EAGLE3-topk1 out tok/s');
    const width = lines[1].length;
    for (const l of lines.slice(2)) expect(l.length).toBe(width);
    expect(out).toContain('* 1×H100, SGLang 0.5.2.');
  });
});
