import { describe, expect, it } from 'vitest';
import { chartSpecs, renderChartSvg, scopeSvgIds } from '../../src/bench/charts.js';
import { escapeHtml, headline } from '../../src/bench/html.js';
import { parseJsonLine } from '../../src/bench/python-json.js';
import { BENCH_SERVING_KEYS, type BenchServingRecord } from '../../src/bench/metrics.js';
import { LEVELS, record, sweepInput } from './report-fixture.js';
import { readResultsJsonl, renderReport, renderResultsJsonl } from '../../src/bench/report-files.js';

describe('charts', () => {
  it('one spec per chart the issue asks for, on a log concurrency axis with every level marked', () => {
    const specs = chartSpecs(sweepInput);
    expect(specs.map((s) => s.id)).toEqual(['throughput', 'speedup', 'accept-length', 'ttft', 'itl']);
    const throughput = specs[0]!.spec as unknown as {
      data: { values: { series: string }[] };
      layer: { encoding: { x: { scale: { type: string }; axis: { values: number[] } } } }[];
    };
    expect(new Set(throughput.data.values.map((v) => v.series))).toEqual(new Set(['baseline', 'EAGLE3']));
    expect(throughput.layer[0]!.encoding.x.scale.type).toBe('log');
    expect(throughput.layer[0]!.encoding.x.axis.values).toEqual(LEVELS);
    const speedup = specs[1]!.spec as unknown as { data: { values: { value: number }[] }; layer: unknown[] };
    expect(speedup.data.values[0]!.value).toBeCloseTo(340 / 150, 12);
    expect(speedup.layer).toHaveLength(2); // the line and the 1.0× rule
  });

  it('leaves out charts without data (no baseline: no speedup; no speculation: no accept length)', () => {
    const ids = chartSpecs({ title: 't', speculative: LEVELS.map((c) => record(c, 10, null)) }).map((s) => s.id);
    expect(ids).toEqual(['throughput', 'ttft', 'itl']);
  });

  it('renders a spec to a non-empty SVG with marks, without a browser', async () => {
    const svg = await renderChartSvg(chartSpecs(sweepInput)[0]!.spec);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toMatch(/class="mark-line/);
    expect(svg).toContain('concurrency (requests in flight)');
  });

  it('scopes SVG ids per chart so several SVGs can share a page', () => {
    const svg =
      '<svg><defs><clipPath id="clip1"><rect/></clipPath></defs><g clip-path="url(#clip1)"><use href="#clip1"/></g><a id="x"/></svg>';
    expect(scopeSvgIds(svg, 'chart-a')).toBe(
      '<svg><defs><clipPath id="chart-a-clip1"><rect/></clipPath></defs><g clip-path="url(#chart-a-clip1)"><use href="#chart-a-clip1"/></g><a id="chart-a-x"/></svg>',
    );
  });
});

describe('report files', () => {
  it('says where the drafter helps most, and where it is slower than the target alone', () => {
    expect(headline(sweepInput)).toBe(
      "EAGLE3 peaks at 2.27× the target alone's output throughput (concurrency 1); 0.60× at concurrency 250; slower than the target alone at concurrency 70, 100, 250; accept length 3.20.",
    );
    expect(headline({ title: 't', speculative: [record(1, 1, null)] })).toBe(
      'No baseline was measured, so there is no speedup.',
    );
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  });

  it('writes results.jsonl with every bench_serving key, bare Infinity, and the variant; reads it back', () => {
    const text = renderResultsJsonl(sweepInput);
    const lines = text.trimEnd().split('\n');
    expect(lines).toHaveLength(16);
    for (const line of lines) {
      expect(line).toContain('"request_rate": Infinity');
      const row = parseJsonLine(line) as Record<string, unknown>;
      expect(Object.keys(row).slice(0, BENCH_SERVING_KEYS.length)).toEqual([...BENCH_SERVING_KEYS]);
    }
    const back = readResultsJsonl(text);
    expect(back.baseline.map((r) => r.max_concurrency)).toEqual(LEVELS);
    expect(back.speculative.map((r) => r.output_throughput)).toEqual(
      sweepInput.speculative.map((r) => r.output_throughput),
    );
    // a JSON payload turned Infinity into null on the way through the workflow: written back as Infinity
    const viaJson = JSON.parse(JSON.stringify(sweepInput.speculative)) as BenchServingRecord[];
    expect(renderResultsJsonl({ speculative: viaJson })).toContain('"request_rate": Infinity');
  });

  it('renders report.md, a self-contained report.html with five inline SVG charts, and the terminal table', async () => {
    const r = await renderReport(sweepInput, '2026-01-01T00:00:00Z');
    const html = r.files['report.html'];
    expect(html.match(/<svg /g)).toHaveLength(5);
    expect(html).not.toMatch(/<script|<link |src="http|href="http/);
    expect(html).toContain('<title>Llama &lt;8B&gt; &amp; EAGLE3</title>');
    expect(html).toContain('<a href="results.jsonl">results.jsonl</a>');
    expect(html).toContain('<td class="bad">0.60×</td>');
    expect(r.files['report.md']).toContain('| 250 | 9600.0 | 5760.0 | 0.60× | 3.10 | 3.20 |');
    expect(r.table.split('\n').filter((l) => /^\s+\d+\s/.test(l))).toHaveLength(8);
  });
});
