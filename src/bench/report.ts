// The benchmark comparison a researcher reads: baseline vs speculative throughput per
// concurrency, with the speedup, accept length and tail latencies that explain it.
// Pure string rendering from BenchServingRecords, one row per concurrency level.

import type { BenchServingRecord } from './metrics.js';
import { PERCENTILE_DEFINITION } from './numpy-stats.js';
import { chatNotes, REASONING_HEADERS, reasoningCells, reasoningRows } from './report-chat.js';
import { metricInterval, requestsOf, roundsOf, speedupInterval } from './rounds.js';
import { formatInterval, verdict, type Interval } from './stats.js';
import { costLines } from './cost.js';
import {
  DASH,
  fixed,
  pairByConcurrency,
  pooledAcceptLength,
  reportedAcceptLength,
  speedupOf,
  type ReportInput,
  type ReportRow,
} from './report-rows.js';

export {
  fixed,
  pairByConcurrency,
  pooledAcceptLength,
  reportedAcceptLength,
  speedup,
  speedupOf,
  type ReportInput,
  type ReportRow,
} from './report-rows.js';
import { extraSections } from './report-sections.js';
import { displayTitle, firstLine } from './summary.js';

export function headers(label: string): string[] {
  return [
    'Concurrency',
    'Baseline out tok/s',
    `${label} out tok/s`,
    'Speedup',
    'Accept length (pooled)',
    'Accept length (per-request mean)',
    'Baseline p99 TTFT (ms)',
    `${label} p99 TTFT (ms)`,
    'Baseline p99 ITL (ms)',
    `${label} p99 ITL (ms)`,
  ];
}

/** Marks a speedup whose interval holds 1×: too wide to say which variant is faster there. */
export const UNDECIDED_MARK = '?';

export function speedupCell(row: ReportRow): string {
  const sp = speedupOf(row);
  if (!sp) return DASH;
  return formatInterval(sp, 2, '×') + (sp.n >= 2 && verdict(sp) === 'undecided' ? ` ${UNDECIDED_MARK}` : '');
}

export function cells(row: ReportRow): string[] {
  return [
    row.concurrency === null ? DASH : String(row.concurrency),
    formatInterval(metricInterval(row.baseline, 'output_throughput'), 1),
    formatInterval(metricInterval(row.speculative, 'output_throughput'), 1),
    speedupCell(row),
    fixed(pooledAcceptLength(row.speculative), 2),
    fixed(reportedAcceptLength(row.speculative), 2),
    formatInterval(metricInterval(row.baseline, 'p99_ttft_ms'), 1),
    formatInterval(metricInterval(row.speculative, 'p99_ttft_ms'), 1),
    formatInterval(metricInterval(row.baseline, 'p99_itl_ms'), 1),
    formatInterval(metricInterval(row.speculative, 'p99_itl_ms'), 1),
  ];
}

/** How many rounds the table's medians are over, and what their intervals cover. */
export function roundsNote(rows: readonly ReportRow[]): string {
  const ns = new Set<number>();
  const coverage = new Set<string>();
  for (const r of rows) {
    for (const rec of [r.baseline, r.speculative]) if (rec) ns.add(roundsOf(rec).length);
    const sp = speedupOf(r);
    if (sp && sp.n >= 2) coverage.add(`${+(sp.coverage * 100).toFixed(2)} %`);
  }
  const rounds = [...ns].sort((a, b) => a - b).join('/');
  if (![...ns].some((n) => n >= 2)) return `Each level was measured once (${rounds || 0} round): no intervals.`;
  return (
    `Each figure is the median of ${rounds} rounds per level, [low–high] its order-statistic interval for the median ` +
    `(coverage ${[...coverage].join(', ') || 'n/a'}, exact and distribution-free); speedup's is over the paired rounds (round i against round i, the same prompts). ` +
    `${UNDECIDED_MARK} = the speedup interval holds 1×: too wide to decide whether the drafter is faster at that level.`
  );
}

/** The line under the comparison table: what speedup, accept length and the p99s are. */
export function comparisonNote(label: string): string {
  return (
    `Speedup = ${label} output tok/s ÷ baseline output tok/s at the same concurrency, per paired round. ` +
    'Accept length (pooled) = Σ completion tokens ÷ Σ verify steps over every speculative request of the level (tokens per target forward, as vLLM and SGLang pool it; ' +
    "the server's own running average where the requests did not report verify steps); (per-request mean) = mean of the requests' meta_info spec_accept_length, as SpecForge averages. " +
    "p99 = numpy.percentile(values, 99), numpy's default 'linear' method, as bench_serving computes it."
  );
}

/** Per variant, its chat levels that streamed reasoning (for the reasoning table). */
export function reasoningTables(input: ReportInput): Array<{ name: string; head: string[]; rows: string[][] }> {
  const label = input.speculativeLabel ?? 'EAGLE3';
  const out: Array<{ name: string; head: string[]; rows: string[][] }> = [];
  for (const [name, records] of [
    [label, input.speculative],
    ['Baseline', input.baseline],
  ] as const) {
    const rs = reasoningRows(records);
    if (rs.length > 0) out.push({ name, head: REASONING_HEADERS, rows: rs.map(reasoningCells) });
  }
  return out;
}

/** Notes the numbers themselves require: failed requests make a row's figures partial; chat levels say how they were timed and counted. */
export function derivedNotes(rows: ReportRow[], label: string): string[] {
  const out: string[] = [];
  for (const r of rows) {
    for (const [name, rec] of [
      ['baseline', r.baseline],
      [label, r.speculative],
    ] as const) {
      if (rec && rec.errors > 0) {
        const first = rec.error_samples[0];
        out.push(
          `Concurrency ${r.concurrency ?? DASH}, ${name}: ${rec.errors} of ${requestsOf(rec)} requests failed` +
            (first ? ` (e.g. ${first})` : '') +
            '; figures cover the successful ones only.',
        );
      }
    }
  }
  out.push(
    ...chatNotes([
      [label, rows.flatMap((r) => (r.speculative ? [r.speculative] : []))],
      ['baseline', rows.flatMap((r) => (r.baseline ? [r.baseline] : []))],
    ]),
  );
  const undecided = rows.filter((r) => {
    const sp = speedupOf(r);
    return sp !== null && sp.n >= 2 && verdict(sp) === 'undecided';
  });
  if (undecided.length > 0)
    out.push(
      `Undecided at concurrency ${undecided.map((r) => r.concurrency ?? DASH).join(', ')}: the speedup interval holds 1×; more rounds (stages.benchmark.rounds) would decide.`,
    );
  return out;
}

export function renderReportMarkdown(input: ReportInput): string {
  const label = input.speculativeLabel ?? 'EAGLE3';
  const rows = pairByConcurrency(input);
  const lines = [
    `# ${displayTitle(input)}`,
    '',
    `**${firstLine(input)}**`,
    '',
    ...markdownTable(headers(label), rows.map(cells)),
    '',
    comparisonNote(label),
    '',
    roundsNote(rows),
  ];
  const notes = [...derivedNotes(rows, label), ...(input.notes ?? [])];
  if (notes.length > 0) lines.push('', ...notes.map((n) => `- ${n}`));
  for (const sec of extraSections(input))
    lines.push('', `## ${sec.heading}`, '', ...markdownTable(sec.head, sec.rows), '', ...sec.notes);
  if (input.settings && input.settings.length > 0)
    lines.push('', '## Settings', '', ...input.settings.map((n) => `- ${n}`));
  for (const [name, records] of [
    [label, input.speculative],
    ['Baseline', input.baseline],
  ] as const) {
    if (!records || records.length === 0) continue;
    const sorted = [...records].sort((a, b) => (a.max_concurrency ?? Infinity) - (b.max_concurrency ?? Infinity));
    lines.push('', `## ${name}: every level`, '', ...markdownTable(DETAIL_HEADERS, sorted.map(detailCells)));
  }
  for (const t of reasoningTables(input))
    lines.push('', `## ${t.name}: reasoning (chat)`, '', ...markdownTable(t.head, t.rows));
  lines.push('', METRIC_DEFINITIONS);
  return lines.join('\n') + '\n';
}

/** Definitions, as bench_serving computes them, printed under every report. */
export const METRIC_DEFINITIONS =
  "Definitions (bench_serving's): throughput = tokens or requests ÷ level duration; TTFT = send → first token " +
  '(chat: first timed delta, see the notes); TPOT = (E2E − TTFT) ÷ (output tokens − 1); ITL = gap between chunks ÷ tokens in the chunk ' +
  '(chat without speculation: one gap per chunk), pooled over requests; E2E = send → end of stream; achieved concurrency = Σ E2E ÷ duration; ' +
  "input tokens = bench_serving's prompt_len (the tokenizer's count of the prompt as sent, special tokens added, no chat template). " +
  `Mean and std: numpy's (std population). ${PERCENTILE_DEFINITION}. Only successful requests count.`;

export const DETAIL_HEADERS = [
  'Concurrency',
  'Completed',
  'Failed',
  'Req/s',
  'Out tok/s',
  'Mean TTFT (ms)',
  'p99 TTFT (ms)',
  'Mean TPOT (ms)',
  'p99 TPOT (ms)',
  'Mean ITL (ms)',
  'p99 ITL (ms)',
  'p99 E2E (ms)',
  'Achieved concurrency',
  'Accept length',
];

export function detailCells(r: BenchServingRecord): string[] {
  return [
    r.max_concurrency === null ? DASH : String(r.max_concurrency),
    String(r.completed),
    String(r.errors ?? 0),
    fixed(r.request_throughput, 2),
    fixed(r.output_throughput, 1),
    fixed(r.mean_ttft_ms, 1),
    fixed(r.p99_ttft_ms, 1),
    fixed(r.mean_tpot_ms, 2),
    fixed(r.p99_tpot_ms, 2),
    fixed(r.mean_itl_ms, 2),
    fixed(r.p99_itl_ms, 2),
    fixed(r.p99_e2e_latency_ms, 1),
    fixed(r.concurrency, 1),
    fixed(reportedAcceptLength(r), 2),
  ];
}

function markdownTable(head: string[], rows: string[][]): string[] {
  return [
    `| ${head.join(' | ')} |`,
    `|${head.map(() => ' ---: ').join('|')}|`,
    ...rows.map((r) => `| ${r.map(escapeCell).join(' | ')} |`),
  ];
}

export function renderReportTable(input: ReportInput): string {
  const label = input.speculativeLabel ?? 'EAGLE3';
  const rows = pairByConcurrency(input);
  const table = [headers(label), ...rows.map(cells)];
  const widths = table[0].map((_, c) => Math.max(...table.map((r) => r[c].length)));
  const fmt = (r: string[]): string =>
    r
      .map((cell, c) => cell.padStart(widths[c]))
      .join('  ')
      .trimEnd();
  const lines = [
    displayTitle(input),
    firstLine(input),
    '',
    fmt(table[0]),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...table.slice(1).map(fmt),
  ];
  const notes = [...derivedNotes(rows, label), ...(input.notes ?? [])];
  if (input.cost) notes.push(costLines(input.cost)[0]!);
  if (notes.length > 0) lines.push('', ...notes.map((n) => `* ${n}`));
  return lines.join('\n') + '\n';
}

function escapeCell(s: string): string {
  return s.replace(/\|/g, '\\|');
}
