import { describe, expect, it } from 'vitest';
import type { BenchServingRecord } from '../../src/bench/metrics.js';
import { renderReportHtml } from '../../src/bench/html.js';
import {
  DETAIL_HEADERS,
  METRIC_DEFINITIONS,
  pairByConcurrency,
  renderReportMarkdown,
  renderReportTable,
  comparisonNote,
  speedup,
} from '../../src/bench/report.js';

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
      '**Verdict: EAGLE3 is faster than the target alone at every measured concurrency up to 10: the crossover is never within the sweep.**',
      '',
      '| Concurrency | Baseline out tok/s | EAGLE3 out tok/s | Speedup | Accept length (pooled) | Accept length (per-request mean) | Baseline p99 TTFT (ms) | EAGLE3 p99 TTFT (ms) | Baseline p99 ITL (ms) | EAGLE3 p99 ITL (ms) |',
      '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      // Records from before rounds and pooled counts: one round each, the server's pooled average in the pooled column.
      '| 1 | 158.0 | 373.0 | 2.36× | 3.10 | 3.46 | 101.0 | 95.3 | 10.1 | 10.1 |',
      '| 10 | 1000.0 | 1380.0 | 1.38× | 2.90 | 2.90 | 110.0 | 110.0 | 11.0 | 11.0 |',
      '| 30 | — | 2500.0 | — | — | 2.50 | — | 130.0 | — | 13.0 |',
      '',
      comparisonNote('EAGLE3'),
      '',
      'Each level was measured once (1 round): no intervals.',
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
        'Verdict: no baseline was measured, so there is no crossover: EAGLE3 alone was benchmarked.',
        '',
        'Concurrency  Baseline out tok/s  EAGLE3 out tok/s  Speedup  Accept length (pooled)  Accept length (per-request mean)  Baseline p99 TTFT (ms)  EAGLE3 p99 TTFT (ms)  Baseline p99 ITL (ms)  EAGLE3 p99 ITL (ms)',
        '-----------  ------------------  ----------------  -------  ----------------------  --------------------------------  ----------------------  --------------------  ---------------------  -------------------',
        '          1                   —              42.3        —                    1.50                              1.50                       —                 101.0                      —                 10.1',
        '',
      ].join('\n'),
    );
  });

  it('aligns every terminal row to the header width and uses the speculative label', () => {
    const out = renderReportTable({ ...input, speculativeLabel: 'EAGLE3-topk1' });
    const lines = out.split('\n').slice(3, 8);
    expect(lines[0]).toContain('EAGLE3-topk1 out tok/s');
    const width = lines[1].length;
    for (const l of lines.slice(2)) expect(l.length).toBe(width);
    expect(out).toContain('* 1×H100, SGLang 0.5.2.');
  });
});

describe('report for chat levels', () => {
  const chat = (c: number, p: Partial<BenchServingRecord>): BenchServingRecord =>
    rec(c, 500, {
      backend: 'sglang-oai-chat',
      total_input_tokens: 400,
      total_input_tokens_server: 560,
      bench_serving_rules: 'bench_serving 0.5.9 (server reports sglang 0.5.9)',
      chat_text_basis: 'content',
      mean_ttft_ms: 480,
      requests_with_reasoning: 16,
      mean_time_to_first_reasoning_ms: 40,
      median_time_to_first_reasoning_ms: 38,
      p99_time_to_first_reasoning_ms: 61.5,
      mean_time_to_first_content_ms: 480,
      total_reasoning_chunks: 512,
      total_reasoning_tokens: 530,
      ...p,
    });

  it('says whose timing rules the chat figures follow, how input tokens were counted, and tables the reasoning phase', () => {
    const md = renderReportMarkdown({
      title: 'Chat',
      speculative: [chat(4, {}), chat(1, { total_input_tokens: null, input_throughput: null })],
    });
    expect(md).toContain(
      "- Chat TTFT and ITL follow bench_serving 0.5.9 (server reports sglang 0.5.9): only delta.content is timed, so a reasoning model's think phase is inside TTFT; time to first reasoning is reported beside it.",
    );
    expect(md).toContain(
      "- Chat input tokens: total_input_tokens counts the raw prompts as bench_serving's prompt_len does",
    );
    expect(md).toContain(
      "- Concurrency 1, EAGLE3: input tokens as bench_serving counts them are unknown (the server's /tokenize did not answer), so total_input_tokens and input_throughput are empty; the server counted 560 with the chat template.",
    );
    const at = md.indexOf('## EAGLE3: reasoning (chat)');
    expect(at).toBeGreaterThan(md.indexOf('## EAGLE3: every level'));
    const table = md.slice(at).split('\n');
    expect(table[2]).toBe(
      '| Concurrency | Requests with reasoning | TTFT times | Mean TTFT (ms) | Mean to first reasoning (ms) | Median to first reasoning (ms) | p99 to first reasoning (ms) | Mean to first content (ms) | Reasoning chunks | Reasoning tokens |',
    );
    expect(table[4]).toBe('| 1 | 16 of 16 | content | 480.0 | 40.0 | 38.0 | 61.5 | 480.0 | 512 | 530 |');
    expect(md.trimEnd().endsWith(METRIC_DEFINITIONS)).toBe(true);
    expect(METRIC_DEFINITIONS).toContain("numpy.percentile(values, p) with numpy's default 'linear' method");
  });

  it('report.html carries the same reasoning table, notes and percentile definitions', () => {
    const html = renderReportHtml({ title: 'Chat', speculative: [chat(4, {})] }, [], { generatedAt: 't' });
    expect(html).toContain('<h3>EAGLE3: reasoning (chat)</h3>');
    expect(html).toContain('<td>16 of 16</td><td>content</td>');
    expect(html).toContain(
      'p99 = numpy.percentile(values, 99), numpy&#39;s default &#39;linear&#39; method, as bench_serving computes it.',
    );
    expect(html).toContain('Chat TTFT and ITL follow bench_serving 0.5.9');
  });

  it('has no reasoning table when no answer streamed reasoning, and no chat notes for /generate', () => {
    const md = renderReportMarkdown({ title: 'Chat', speculative: [chat(4, { requests_with_reasoning: 0 })] });
    expect(md).not.toContain('reasoning (chat)');
    expect(renderReportMarkdown({ title: 'Gen', speculative: [rec(4, 10)] })).not.toContain('Chat input tokens');
  });
});
