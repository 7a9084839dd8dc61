/**
 * `aerie compare <run> <run> …`: two or more finished runs side by side, from their local run
 * folders (.aerie/runs/<run>/: config.yaml, results.jsonl, result.json): drafter, data, the
 * settings that differ, accept length and speedup per level, crossover, GPU-hours. Printed as
 * Markdown and written as compare.md and compare.html (one self-contained file, like
 * report.html) under .aerie/compare/<run>--<run>…/ or --out.
 *
 * Everything but GPU-hours is recomputed from results.jsonl (src/bench/summary.ts), so runs
 * from before the summary existed compare too; GPU-hours come from result.json's report summary.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { formatGpuHours, type RunCost } from '../bench/cost.js';
import { crossoverRange, suggestedMaxRunning, type Crossover } from '../bench/crossover.js';
import { escapeHtml } from '../bench/html.js';
import type { BenchServingRecord } from '../bench/metrics.js';
import { readResultsJsonl } from '../bench/report-files.js';
import { pairByConcurrency, pooledAcceptLength, reportedAcceptLength, speedupOf } from '../bench/report.js';
import { formatInterval, verdict } from '../bench/stats.js';
import { reportCrossover, simulatedOf } from '../bench/summary.js';
import { stateDir } from '../temporal/dev-server.js';
import { localRunFolder } from './run-folder.js';

export interface RunView {
  runId: string;
  config: Record<string, unknown> | undefined;
  baseline: BenchServingRecord[];
  speculative: BenchServingRecord[];
  cost: RunCost | null;
}

export interface CompareOptions {
  out?: { write(s: string): unknown };
  /** Where a run's folder is; default .aerie/runs/<run>. */
  folderOf?: (runId: string) => string;
  /** Where compare.md and compare.html go; default .aerie/compare/<runs joined by -->. */
  outDir?: string;
}

export class CompareError extends Error {
  override readonly name = 'CompareError';
}

async function readText(path: string): Promise<string | undefined> {
  return readFile(path, 'utf8').catch(() => undefined);
}

export async function loadRunView(runId: string, folder: string): Promise<RunView> {
  const results = await readText(join(folder, 'results.jsonl'));
  if (results === undefined)
    throw new CompareError(
      `run ${runId}: no results.jsonl in ${folder}; \`aerie report ${runId}\` copies it from the host once the run has finished`,
    );
  const { baseline, speculative } = readResultsJsonl(results);
  const yaml = await readText(join(folder, 'config.yaml'));
  let config: Record<string, unknown> | undefined;
  try {
    config = yaml === undefined ? undefined : (parseYaml(yaml) as Record<string, unknown>);
  } catch {
    config = undefined;
  }
  let cost: RunCost | null = null;
  const result = await readText(join(folder, 'result.json'));
  if (result !== undefined) {
    try {
      const r = JSON.parse(result) as { report?: { summary?: { cost?: RunCost | null } } };
      cost = r.report?.summary?.cost ?? null;
    } catch {
      cost = null;
    }
  }
  return { runId, config, baseline, speculative, cost };
}

/** Dotted paths → JSON values of a config's leaves (arrays are one leaf). */
export function flatten(v: unknown, prefix = '', out: Record<string, string> = {}): Record<string, string> {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) flatten(x, prefix ? `${prefix}.${k}` : k, out);
  } else if (prefix) {
    out[prefix] = JSON.stringify(v);
  }
  return out;
}

/** The config paths whose values are not the same in every run (absent counts as a value). */
export function differingSettings(configs: readonly (Record<string, unknown> | undefined)[]): string[] {
  const flat = configs.map((c) => flatten(c ?? {}));
  const keys = new Set(flat.flatMap((f) => Object.keys(f)));
  return [...keys].filter((k) => new Set(flat.map((f) => f[k] ?? '(unset)')).size > 1).sort();
}

function at(config: Record<string, unknown> | undefined, path: string): string {
  const v = flatten(config ?? {})[path];
  return v === undefined ? '—' : v.replace(/^"|"$/g, '');
}

function drafterOf(v: RunView): string {
  const explicit = at(v.config, 'stages.deploy.draft-model-path');
  return explicit !== '—' ? explicit : 'trained in the run (train/drafter)';
}

function dataOf(v: RunView): string {
  const input = at(v.config, 'stages.generate.input');
  const n = at(v.config, 'stages.generate.num-samples');
  return n === '—' ? input : `${input} (first ${n} rows)`;
}

function crossoverText(x: Crossover | null): string {
  if (!x) return 'no baseline';
  if (x.median.kind === 'never') return `never within the sweep (≤ ${x.median.last})`;
  if (x.median.kind === 'from-start') return `slower from concurrency ${x.median.first}`;
  return `${crossoverRange(x)}; --max-running-requests ${suggestedMaxRunning(x)}`;
}

export interface Comparison {
  runs: string[];
  head: string[];
  /** The "what" rows (drafter, data, settings that differ, crossover, GPU-hours). */
  about: string[][];
  /** Per level: speedup and accept lengths of each run. */
  levels: string[][];
  levelHead: string[];
  simulated: boolean;
}

export function compareRuns(views: readonly RunView[]): Comparison {
  const runs = views.map((v) => v.runId);
  const head = ['', ...runs];
  const about: string[][] = [
    ['Drafter', ...views.map(drafterOf)],
    ['Data', ...views.map(dataOf)],
  ];
  const differing = differingSettings(views.map((v) => v.config));
  if (differing.length === 0) about.push(['Settings that differ', ...views.map(() => '(none)')]);
  for (const path of differing) about.push([path, ...views.map((v) => at(v.config, path))]);
  about.push(['Crossover', ...views.map((v) => crossoverText(reportCrossover(v)))]);
  about.push(['GPU-hours', ...views.map((v) => (v.cost ? formatGpuHours(v.cost.totalGpuHours) : '—'))]);
  const sims = views.map((v) => simulatedOf(v));
  // Records from before the simulator marked itself carry no server_simulated key at all: unknown, not "real".
  const marked = (v: RunView) => [...v.speculative, ...v.baseline].some((r) => 'server_simulated' in r);
  about.push([
    'Servers',
    ...views.map((v, i) =>
      sims[i]
        ? `SIMULATED (${sims[i]})`
        : marked(v)
          ? 'not the simulator (by /server_info, or /version for vLLM)'
          : 'unknown (results from before servers were identified)',
    ),
  ]);

  const levels = [...new Set(views.flatMap((v) => pairByConcurrency(v).map((r) => r.concurrency)))]
    .filter((c): c is number => c !== null)
    .sort((a, b) => a - b);
  const levelHead = ['Concurrency', ...runs.flatMap((r) => [`${r} speedup`, `${r} accept (pooled / per-request)`])];
  const rows = levels.map((c) => [
    String(c),
    ...views.flatMap((v) => {
      const row = pairByConcurrency(v).find((r) => r.concurrency === c);
      if (!row) return ['—', '—'];
      const sp = speedupOf(row);
      const mark = sp && sp.n >= 2 && verdict(sp) === 'undecided' ? ' ?' : '';
      const fmt = (x: number | undefined) => (x === undefined ? '—' : x.toFixed(2));
      return [
        formatInterval(sp, 2, '×') + mark,
        `${fmt(pooledAcceptLength(row.speculative))} / ${fmt(reportedAcceptLength(row.speculative))}`,
      ];
    }),
  ]);
  return { runs, head, about, levels: rows, levelHead, simulated: sims.some(Boolean) };
}

export function mdTable(head: string[], rows: string[][]): string[] {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  return [
    `| ${head.map(cell).join(' | ')} |`,
    `|${head.map(() => ' --- ').join('|')}|`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ];
}

function title(c: Comparison): string {
  return `${c.simulated ? 'SIMULATED (at least one run was on the simulator): ' : ''}aerie compare ${c.runs.join(' vs ')}`;
}

export function renderCompareMarkdown(c: Comparison): string {
  return (
    [
      `# ${title(c)}`,
      '',
      ...mdTable(c.head, c.about),
      '',
      '## Speedup and accept length per level',
      '',
      ...mdTable(c.levelHead, c.levels),
      '',
      'Speedup: median over the paired rounds [interval]; ? = the interval holds 1×. Accept length: pooled (Σ tokens ÷ Σ verify steps) / per-request mean. Settings listed are the config paths whose values differ between the runs.',
    ].join('\n') + '\n'
  );
}

export const COMPARE_CSS = `body { font: 14px/1.45 system-ui, sans-serif; color: #222; margin: 2rem auto; max-width: 1320px; padding: 0 1.5rem; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: .5rem 0; }
th, td { border: 1px solid #ddd; padding: .25rem .6rem; text-align: left; vertical-align: top; }
th { background: #f4f6f8; } .note { color: #555; }
.simulated { background: #fff4e5; border: 2px solid #d97706; color: #8a4b00; font-weight: 700; padding: .4rem .8rem; display: inline-block; }`;

export function htmlTable(id: string, head: string[], rows: string[][]): string {
  const th = head.map((h) => `<th>${escapeHtml(h)}</th>`).join('');
  const body = rows.map((r) => `<tr>${r.map((x) => `<td>${escapeHtml(x)}</td>`).join('')}</tr>`).join('\n');
  return `<table id="${id}">\n<thead><tr>${th}</tr></thead>\n<tbody>\n${body}\n</tbody>\n</table>`;
}

export function renderCompareHtml(c: Comparison): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(title(c))}</title>
<style>${COMPARE_CSS}</style>
</head>
<body>
${c.simulated ? '<p class="simulated" id="simulated">SIMULATED: at least one of these runs was measured on the simulator, not a GPU.</p>\n' : ''}<h1>${escapeHtml(title(c))}</h1>
${htmlTable('about', c.head, c.about)}
<h2>Speedup and accept length per level</h2>
${htmlTable('levels', c.levelHead, c.levels)}
<p class="note">Speedup: median over the paired rounds [interval]; ? = the interval holds 1×. Accept length: pooled (Σ tokens ÷ Σ verify steps) / per-request mean.</p>
</body>
</html>
`;
}

export async function compareCommand(runIds: readonly string[], opts: CompareOptions = {}): Promise<number> {
  const out = opts.out ?? process.stdout;
  if (runIds.length < 2) {
    out.write('compare needs two or more run ids: aerie compare <run> <run> …\n');
    return 2;
  }
  const folderOf = opts.folderOf ?? localRunFolder;
  let views: RunView[];
  try {
    views = await Promise.all(runIds.map((id) => loadRunView(id, folderOf(id))));
  } catch (err) {
    if (err instanceof CompareError) {
      out.write(`${err.message}\n`);
      return 1;
    }
    throw err;
  }
  const c = compareRuns(views);
  const md = renderCompareMarkdown(c);
  const dir = opts.outDir ?? join(stateDir(), 'compare', runIds.join('--'));
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'compare.md'), md);
  await writeFile(join(dir, 'compare.html'), renderCompareHtml(c));
  out.write(`${md}\nwritten: ${join(dir, 'compare.md')}, ${join(dir, 'compare.html')}\n`);
  return 0;
}
