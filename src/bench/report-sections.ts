// The report's sections beyond the comparison table, as plain tables both report.md and
// report.html draw: acceptance per position, per category, and the run's GPU-hours.

import { costLines, formatGpuHours } from './cost.js';
import { pairByConcurrency, fixed, type ReportInput } from './report-rows.js';
import { categoryRows } from './summary.js';

export interface Section {
  id: string;
  heading: string;
  head: string[];
  rows: string[][];
  notes: string[];
}

const pct = (v: number): string => `${(v * 100).toFixed(1)} %`;

/** Share of verify steps accepting at least j drafts, per level, where the server reported its histogram. */
export function perPositionSection(input: ReportInput): Section | undefined {
  const rows = pairByConcurrency(input).filter((r) => r.speculative?.accept_per_position);
  if (rows.length === 0) return undefined;
  const width = Math.max(...rows.map((r) => r.speculative!.accept_per_position!.length));
  return {
    id: 'per-position',
    heading: 'Acceptance per draft position',
    head: ['Concurrency', 'Verify steps', ...Array.from({ length: width }, (_, j) => `≥ ${j + 1} accepted`)],
    rows: rows.map((r) => {
      const p = r.speculative!.accept_per_position!;
      return [
        String(r.concurrency),
        String(r.speculative!.spec_verify_steps ?? '—'),
        ...Array.from({ length: width }, (_, j) => (p[j] === undefined ? '—' : pct(p[j]))),
      ];
    }),
    notes: [
      "Share of the level's verify steps that accepted at least j draft tokens (bonus token not counted), from the accepted-drafts histogram SGLang returns per request (meta_info spec_correct_drafts_histogram, spec_accept_histogram before 0.5.12), summed over every round.",
    ],
  };
}

export function categorySection(input: ReportInput): Section | undefined {
  const rows = categoryRows(input);
  if (rows.length === 0) return undefined;
  const label = input.speculativeLabel ?? 'EAGLE3';
  return {
    id: 'categories',
    heading: 'Per category',
    head: [
      'Concurrency',
      'Category',
      'Requests',
      'Accept length (pooled)',
      'Accept length (per-request mean)',
      'Speedup (TPOT)',
    ],
    rows: rows.map((r) => [
      String(r.concurrency),
      r.category,
      String(r.requests),
      fixed(r.acceptPooled, 2),
      fixed(r.acceptPerRequest, 2),
      r.speedup === null ? '—' : `${r.speedup.toFixed(2)}×`,
    ]),
    notes: [
      `Categories from the dataset's per-prompt \`category\` field. Speedup (TPOT) = baseline mean TPOT ÷ ${label} mean TPOT over the category's requests at that level (the categories share each batch, so a per-category throughput does not exist); requests summed over every round.`,
    ],
  };
}

export function costSection(input: ReportInput): Section | undefined {
  const c = input.cost;
  if (!c) return undefined;
  return {
    id: 'cost',
    heading: 'Cost (GPU-hours)',
    head: ['Stage', 'Launches', 'Wall time (s)', 'GPU-hours'],
    rows: [
      ...c.stages.map((s) => [s.stage, String(s.launches), s.wallSeconds.toFixed(1), formatGpuHours(s.gpuHours)]),
      [
        'total',
        String(c.launches.length),
        c.stages.reduce((a, s) => a + s.wallSeconds, 0).toFixed(1),
        formatGpuHours(c.totalGpuHours),
      ],
    ],
    notes: [costLines(c)[1]!],
  };
}

export function extraSections(input: ReportInput): Section[] {
  return [perPositionSection(input), categorySection(input), costSection(input)].filter(
    (s): s is Section => s !== undefined,
  );
}
