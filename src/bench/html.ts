// report.html: one self-contained file (inline CSS and SVG, no scripts, no external
// requests), so it can be mailed, attached to a ticket or opened from a run folder.

import type { RenderedChart } from './charts.js';
import {
  cells,
  comparisonNote,
  derivedNotes,
  DETAIL_HEADERS,
  detailCells,
  headers,
  METRIC_DEFINITIONS,
  pairByConcurrency,
  reasoningTables,
  reportedAcceptLength,
  roundsNote,
  speedup,
  speedupOf,
  type ReportInput,
} from './report.js';
import { extraSections } from './report-sections.js';
import { verdict } from './stats.js';
import { displayTitle, firstLine, simulatedOf } from './summary.js';

export interface HtmlExtras {
  /** ISO time the report was written. */
  generatedAt: string;
  /** File names next to report.html, linked from it. */
  siblings?: string[];
}

const CSS = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 2rem auto; max-width: 1320px; padding: 0 1.5rem; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.headline { font-size: 1.05rem; margin: .5rem 0 1.25rem; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(500px, 1fr)); gap: 1rem 1.5rem; }
figure { margin: 0; }
figcaption { font-weight: 600; margin-bottom: .25rem; }
figure svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: .5rem 0; }
th, td { border: 1px solid #ddd; padding: .25rem .6rem; text-align: right; }
th { background: #f4f6f8; }
td.good { color: #1a7f37; font-weight: 600; } td.bad { color: #b42318; font-weight: 600; } td.undecided { color: #9a6700; font-weight: 600; }
.verdict { font-size: 1.1rem; font-weight: 600; margin: .5rem 0 .25rem; }
.simulated { background: #fff4e5; border: 2px solid #d97706; color: #8a4b00; font-weight: 700; padding: .4rem .8rem; border-radius: 4px; display: inline-block; }
.note, footer { color: #555; }
code { background: #f4f6f8; padding: 0 .25rem; border-radius: 3px; }
`;

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** One sentence a reader takes away: where the drafter helps most and what is left at the top level. */
export function headline(input: ReportInput): string {
  const label = input.speculativeLabel ?? 'EAGLE3';
  const rows = pairByConcurrency(input);
  const withSpeedup = rows
    .map((r) => ({ c: r.concurrency, s: speedup(r) }))
    .filter((x): x is { c: number; s: number } => x.s !== undefined && x.c !== null);
  const parts: string[] = [];
  if (withSpeedup.length > 0) {
    const best = withSpeedup.reduce((a, b) => (b.s > a.s ? b : a));
    const top = withSpeedup[withSpeedup.length - 1]!;
    parts.push(`${label} peaks at ${best.s.toFixed(2)}× the target alone's output throughput (concurrency ${best.c})`);
    if (top.c !== best.c) parts.push(`${top.s.toFixed(2)}× at concurrency ${top.c}`);
    const below = withSpeedup.filter((x) => x.s < 1).map((x) => x.c);
    if (below.length > 0) parts.push(`slower than the target alone at concurrency ${below.join(', ')}`);
  } else {
    parts.push('no baseline was measured, so there is no speedup');
  }
  const accept = input.speculative
    .map(reportedAcceptLength)
    .filter((v): v is number => v !== undefined && Number.isFinite(v));
  if (accept.length > 0) {
    const lo = Math.min(...accept);
    const hi = Math.max(...accept);
    parts.push(`accept length ${lo === hi ? lo.toFixed(2) : `${lo.toFixed(2)}–${hi.toFixed(2)}`}`);
  }
  const s = parts.join('; ');
  return s.charAt(0).toUpperCase() + s.slice(1) + '.';
}

function table(head: string[], rows: string[][], classify?: (row: number, col: number) => string | undefined): string {
  const th = head.map((h) => `<th>${escapeHtml(h)}</th>`).join('');
  const body = rows
    .map(
      (r, i) =>
        `<tr>${r.map((c, j) => `<td${classify?.(i, j) ? ` class="${classify(i, j)}"` : ''}>${escapeHtml(c)}</td>`).join('')}</tr>`,
    )
    .join('\n');
  return `<table>\n<thead><tr>${th}</tr></thead>\n<tbody>\n${body}\n</tbody>\n</table>`;
}

export function renderReportHtml(input: ReportInput, charts: readonly RenderedChart[], extras: HtmlExtras): string {
  const label = input.speculativeLabel ?? 'EAGLE3';
  const rows = pairByConcurrency(input);
  const speedupCol = headers(label).indexOf('Speedup');
  const comparison = table(headers(label), rows.map(cells), (i, j) => {
    if (j !== speedupCol) return undefined;
    const s = speedupOf(rows[i]!);
    if (!s) return undefined;
    if (s.n >= 2 && verdict(s) === 'undecided') return 'undecided';
    return s.median >= 1 ? 'good' : 'bad';
  });
  const sim = simulatedOf(input);
  const sections = extraSections(input).map(
    (sec) =>
      `<h2 id="${escapeHtml(sec.id)}">${escapeHtml(sec.heading)}</h2>\n${table(sec.head, sec.rows)}\n${sec.notes.map((n) => `<p class="note">${escapeHtml(n)}</p>`).join('\n')}`,
  );
  const notes = [...derivedNotes(rows, label), ...(input.notes ?? [])];
  const details: string[] = [];
  for (const [name, records] of [
    [label, input.speculative],
    ['Baseline', input.baseline],
  ] as const) {
    if (!records || records.length === 0) continue;
    const sorted = [...records].sort((a, b) => (a.max_concurrency ?? Infinity) - (b.max_concurrency ?? Infinity));
    details.push(`<h3>${escapeHtml(name)}</h3>`, table(DETAIL_HEADERS, sorted.map(detailCells)));
  }
  for (const t of reasoningTables(input))
    details.push(`<h3>${escapeHtml(t.name)}: reasoning (chat)</h3>`, table(t.head, t.rows));
  const figures = charts.map(
    (c) =>
      `<figure id="chart-${escapeHtml(c.id)}" data-chart="${escapeHtml(c.id)}">\n<figcaption>${escapeHtml(c.title)}</figcaption>\n${c.svg}\n</figure>`,
  );
  const siblings = (extras.siblings ?? []).map((f) => `<a href="${encodeURI(f)}">${escapeHtml(f)}</a>`).join(', ');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(displayTitle(input))}</title>
<style>${CSS}</style>
</head>
<body>
${sim ? `<p class="simulated" id="simulated">SIMULATED — these servers said they were ${escapeHtml(sim)}: no GPU was measured.</p>\n` : ''}<h1>${escapeHtml(displayTitle(input))}</h1>
<p class="verdict" id="verdict">${escapeHtml(firstLine(input))}</p>
<p class="headline">${escapeHtml(headline(input))}</p>
<section class="charts">
${figures.join('\n')}
</section>
<h2>${escapeHtml(label)} vs the target alone</h2>
${comparison}
<p class="note">${escapeHtml(comparisonNote(label))}</p>
<p class="note" id="rounds-note">${escapeHtml(roundsNote(rows))}</p>
${notes.length > 0 ? `<h2>Notes</h2>\n<ul>\n${notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('\n')}\n</ul>` : ''}
${sections.join('\n')}
${input.settings && input.settings.length > 0 ? `<h2>Settings</h2>\n<ul>\n${input.settings.map((n) => `<li>${escapeHtml(n)}</li>`).join('\n')}\n</ul>` : ''}
<h2>Every level</h2>
${details.join('\n')}
<p class="note">${escapeHtml(METRIC_DEFINITIONS)}</p>
<footer>Written by aerie at ${escapeHtml(extras.generatedAt)}.${siblings ? ` Same numbers as bench_serving JSONL: ${siblings}.` : ''}</footer>
</body>
</html>
`;
}
