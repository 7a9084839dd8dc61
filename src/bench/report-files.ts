// The three files of a benchmark report, rendered together from the records:
//   results.jsonl  one bench_serving-compatible line per level and variant (bench_serving's
//                  keys first, in its order, bare Infinity included; then aerie's extras and
//                  aerie_variant), so existing analysis scripts read it unchanged
//   report.md      the tables
//   report.html    tables and SVG charts in one self-contained file

import { renderCharts } from './charts.js';
import { renderReportHtml } from './html.js';
import { formatJsonLine, parseJsonLines } from './python-json.js';
import type { BenchServingRecord } from './metrics.js';
import { renderReportMarkdown, renderReportTable, type ReportInput } from './report.js';

export const REPORT_FILES = ['report.md', 'report.html', 'results.jsonl'] as const;
export type ReportFileName = (typeof REPORT_FILES)[number];

export interface RenderedReport {
  files: Record<ReportFileName, string>;
  /** The fixed-width table the CLI prints. */
  table: string;
}

export type VariantName = 'baseline' | 'eagle3';

/** Workflow payloads are JSON, where bench_serving's request_rate Infinity became null: restore it. */
function resultLine(r: BenchServingRecord, variant: VariantName): string {
  return formatJsonLine({ ...r, request_rate: r.request_rate ?? Infinity, aerie_variant: variant });
}

export function renderResultsJsonl(input: Pick<ReportInput, 'baseline' | 'speculative'>): string {
  const lines = [
    ...(input.baseline ?? []).map((r) => resultLine(r, 'baseline')),
    ...input.speculative.map((r) => resultLine(r, 'eagle3')),
  ];
  return lines.length > 0 ? lines.join('\n') + '\n' : '';
}

/** results.jsonl back into the two variants (lines without aerie_variant count as the speculative run). */
export function readResultsJsonl(text: string): { baseline: BenchServingRecord[]; speculative: BenchServingRecord[] } {
  const baseline: BenchServingRecord[] = [];
  const speculative: BenchServingRecord[] = [];
  for (const row of parseJsonLines(text)) {
    const r = row as BenchServingRecord & { aerie_variant?: string };
    (r.aerie_variant === 'baseline' ? baseline : speculative).push(r);
  }
  return { baseline, speculative };
}

export async function renderReport(
  input: ReportInput,
  generatedAt = new Date().toISOString(),
): Promise<RenderedReport> {
  const charts = await renderCharts(input);
  return {
    files: {
      'report.md': renderReportMarkdown(input),
      'report.html': renderReportHtml(input, charts, { generatedAt, siblings: ['results.jsonl', 'report.md'] }),
      'results.jsonl': renderResultsJsonl(input),
    },
    table: renderReportTable(input),
  };
}
