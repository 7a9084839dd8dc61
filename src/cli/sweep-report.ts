/**
 * A sweep's one report (sweep.md, sweep.html): `aerie compare`'s tables over the variants' run
 * folders, headed by the variants' labels, with the best variant marked at each concurrency
 * level and overall. Pure: views in, text out.
 */
import { escapeHtml } from '../bench/html.js';
import { pairByConcurrency, speedupOf } from '../bench/report.js';
import { COMPARE_CSS, compareRuns, htmlTable, mdTable, type Comparison, type RunView } from './compare.js';

export interface SweepVariantView {
  label: string;
  runId: string;
  /** completed, failed, cancelled (the sweep's board). */
  state: string;
  error?: string;
  /** The run folder's results, for a completed variant. */
  view?: RunView;
}

export interface SweepReportInput {
  sweepId: string;
  configPath: string;
  /** What was computed once, and in which run (sweep-share.ts's reason). */
  shared: { reason: string; runId?: string };
  variants: SweepVariantView[];
}

export interface Best {
  perLevel: { concurrency: number; label: string; speedup: number }[];
  overall?: { label: string; geomean: number; levels: number[] };
}

export const BEST_DEFINITION =
  'Best: at each concurrency level, the variant with the highest median speedup (speculative ÷ target-alone output throughput, median over the paired rounds); overall, the variant with the highest geometric mean of those median speedups over the levels every completed variant measured. A best whose interval overlaps another variant’s is not a decided win: read the intervals in the table.';

/** Median speedup per level of each measured variant. */
function speedups(v: RunView): Map<number, number> {
  const m = new Map<number, number>();
  for (const row of pairByConcurrency(v)) {
    const sp = speedupOf(row);
    if (row.concurrency !== null && sp) m.set(row.concurrency, sp.median);
  }
  return m;
}

export function bestOf(variants: readonly { label: string; view: RunView }[]): Best {
  const per = variants.map((v) => ({ label: v.label, sp: speedups(v.view) }));
  const levels = [...new Set(per.flatMap((p) => [...p.sp.keys()]))].sort((a, b) => a - b);
  const perLevel = levels.flatMap((c) => {
    const top = per
      .filter((p) => p.sp.has(c))
      .reduce<{ label: string; speedup: number } | undefined>(
        (b, p) => (b && b.speedup >= p.sp.get(c)! ? b : { label: p.label, speedup: p.sp.get(c)! }),
        undefined,
      );
    return top ? [{ concurrency: c, ...top }] : [];
  });
  const common = levels.filter((c) => per.every((p) => p.sp.has(c)));
  if (common.length === 0 || per.length === 0) return { perLevel };
  const geo = per.map((p) => ({
    label: p.label,
    geomean: Math.exp(common.reduce((s, c) => s + Math.log(p.sp.get(c)!), 0) / common.length),
  }));
  const top = geo.reduce((b, g) => (g.geomean > b.geomean ? g : b));
  return { perLevel, overall: { ...top, levels: common } };
}

export interface SweepReport {
  title: string;
  variantHead: string[];
  variantRows: string[][];
  comparison?: Comparison;
  /** Output throughput per level: EAGLE3 / the target alone, per variant (the median round's, tok/s). */
  throughputHead: string[];
  throughputRows: string[][];
  bestHead: string[];
  bestRows: string[][];
  best: Best;
  simulated: boolean;
}

export function buildSweepReport(input: SweepReportInput): SweepReport {
  const measured = input.variants.flatMap((v) => (v.view ? [{ label: v.label, view: v.view }] : []));
  const best = bestOf(measured);
  const geo = (label: string) => {
    const v = measured.find((m) => m.label === label);
    if (!v || !best.overall) return '—';
    const sp = speedups(v.view);
    const g = Math.exp(best.overall.levels.reduce((s, c) => s + Math.log(sp.get(c)!), 0) / best.overall.levels.length);
    return `${g.toFixed(2)}×`;
  };
  const variantRows = input.variants.map((v) => [
    v.label,
    v.runId,
    v.error ? `${v.state}: ${v.error.split('\n')[0]!.slice(0, 160)}` : v.state,
    geo(v.label),
    best.overall?.label === v.label ? '★ best overall' : '',
  ]);
  // compare's tables, headed by the variants' labels rather than their run ids.
  const comparison =
    measured.length > 0 ? compareRuns(measured.map((m) => ({ ...m.view, runId: m.label }))) : undefined;
  if (comparison)
    markBestPerLevel(
      comparison,
      measured.map((m) => m.label),
      best,
    );
  const simulated = comparison?.simulated ?? false;
  return {
    title: `${simulated ? 'SIMULATED (at least one variant was on the simulator): ' : ''}aerie sweep ${input.sweepId}`,
    variantHead: ['Variant', 'Run', 'Status', 'Geometric-mean speedup', 'Best'],
    variantRows,
    comparison,
    ...throughputTable(measured),
    bestHead: ['Concurrency', 'Best variant', 'Median speedup'],
    bestRows: best.perLevel.map((b) => [String(b.concurrency), b.label, `${b.speedup.toFixed(2)}×`]),
    best,
    simulated,
  };
}

function throughputTable(measured: readonly { label: string; view: RunView }[]) {
  const rows = measured.map((m) => pairByConcurrency(m.view));
  const levels = [...new Set(rows.flatMap((r) => r.map((x) => x.concurrency)))]
    .filter((c): c is number => c !== null)
    .sort((a, b) => a - b);
  const tok = (x: number | undefined) => (x === undefined ? '—' : x.toFixed(0));
  return {
    throughputHead: ['Concurrency', ...measured.map((m) => `${m.label} EAGLE3 / target alone (tok/s)`)],
    throughputRows: levels.map((c) => [
      String(c),
      ...rows.map((r) => {
        const row = r.find((x) => x.concurrency === c);
        return row ? `${tok(row.speculative?.output_throughput)} / ${tok(row.baseline?.output_throughput)}` : '—';
      }),
    ]),
  };
}

/** ★ after the best variant's speedup in each level's row (cells: level, then speedup and accept per variant). */
function markBestPerLevel(c: Comparison, labels: readonly string[], best: Best): void {
  for (const row of c.levels) {
    const b = best.perLevel.find((p) => String(p.concurrency) === row[0]);
    const i = b ? labels.indexOf(b.label) : -1;
    if (i >= 0 && labels.length > 1) row[1 + 2 * i] = `${row[1 + 2 * i]} ★`;
  }
}

function sharedLine(input: SweepReportInput): string {
  return `Shared: ${input.shared.reason}${input.shared.runId ? ` (run ${input.shared.runId})` : ''}.`;
}

export function renderSweepMarkdown(input: SweepReportInput, r: SweepReport): string {
  const o = r.best.overall;
  return (
    [
      `# ${r.title}`,
      '',
      `Config: \`${input.configPath}\`. ${sharedLine(input)}`,
      '',
      o
        ? `**Best overall: ${o.label}** (geometric-mean speedup ${o.geomean.toFixed(2)}× over concurrency ${o.levels.join(', ')}).`
        : '**Best overall: none** (no level was measured by every completed variant).',
      '',
      '## Variants',
      '',
      ...mdTable(r.variantHead, r.variantRows),
      '',
      ...(r.comparison
        ? [
            '## Settings and results',
            '',
            ...mdTable(r.comparison.head, r.comparison.about),
            '',
            '## Speedup and accept length per level (★ best at that level)',
            '',
            ...mdTable(r.comparison.levelHead, r.comparison.levels),
            '',
            '## Output throughput per level (the median round)',
            '',
            ...mdTable(r.throughputHead, r.throughputRows),
            '',
          ]
        : []),
      '## Best per concurrency level',
      '',
      ...mdTable(r.bestHead, r.bestRows),
      '',
      BEST_DEFINITION,
      '',
      'Speedup: median over the paired rounds [interval]; ? = the interval holds 1×. Accept length: pooled (Σ tokens ÷ Σ verify steps) / per-request mean.',
    ].join('\n') + '\n'
  );
}

export function renderSweepHtml(input: SweepReportInput, r: SweepReport): string {
  const o = r.best.overall;
  const tables = r.comparison
    ? `<h2>Settings and results</h2>
${htmlTable('about', r.comparison.head, r.comparison.about)}
<h2>Speedup and accept length per level (★ best at that level)</h2>
${htmlTable('levels', r.comparison.levelHead, r.comparison.levels)}
<h2>Output throughput per level (the median round)</h2>
${htmlTable('throughput', r.throughputHead, r.throughputRows)}
`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(r.title)}</title>
<style>${COMPARE_CSS}</style>
</head>
<body>
${r.simulated ? '<p class="simulated" id="simulated">SIMULATED: at least one variant was measured on the simulator, not a GPU.</p>\n' : ''}<h1>${escapeHtml(r.title)}</h1>
<p class="note">Config: <code>${escapeHtml(input.configPath)}</code>. ${escapeHtml(sharedLine(input))}</p>
<p id="best-overall"><strong>${o ? `Best overall: ${escapeHtml(o.label)}` : 'Best overall: none'}</strong>${o ? ` (geometric-mean speedup ${o.geomean.toFixed(2)}× over concurrency ${o.levels.join(', ')})` : ' (no level was measured by every completed variant)'}</p>
<h2>Variants</h2>
${htmlTable('variants', r.variantHead, r.variantRows)}
${tables}<h2>Best per concurrency level</h2>
${htmlTable('best', r.bestHead, r.bestRows)}
<p class="note">${escapeHtml(BEST_DEFINITION)}</p>
</body>
</html>
`;
}
