// The report's charts as static SVG, rendered without a browser: Vega-Lite specs
// (pure, one per chart) compiled to Vega and drawn by a headless vega View.
//
// Several SVGs share one HTML page, and Vega names its clip paths and gradients with
// the same ids in every SVG it draws; browsers resolve url(#id) page-wide, so each
// chart's ids are prefixed with the chart's own id.

import type { TopLevelSpec } from 'vega-lite';
import type { BenchServingRecord } from './metrics.js';
import { pairByConcurrency, speedupOf, type ReportInput } from './report.js';
import { metricInterval, type RoundMetric } from './rounds.js';
import { SIMULATED_LABEL } from './simulated.js';
import { simulatedOf } from './summary.js';

export interface ChartSpec {
  id: string;
  title: string;
  spec: TopLevelSpec;
}

export interface RenderedChart {
  id: string;
  title: string;
  svg: string;
}

const WIDTH = 400;
const HEIGHT = 240;
const BASELINE_COLOR = '#7f7f7f';
const SPECULATIVE_COLOR = '#1f77b4';

interface Point {
  concurrency: number;
  series: string;
  value: number;
  /** The interval over the level's rounds (stats.ts), drawn as an error bar; absent for one round. */
  lo?: number;
  hi?: number;
}

/** A level's median over its rounds with the interval, for a figure the rounds carry. */
function roundPoints(records: readonly BenchServingRecord[] | undefined, series: string, metric: RoundMetric): Point[] {
  const out: Point[] = [];
  for (const r of records ?? []) {
    const i = metricInterval(r, metric);
    if (r.max_concurrency === null || !i) continue;
    out.push({ concurrency: r.max_concurrency, series, value: i.median, ...(i.n >= 2 ? { lo: i.lo, hi: i.hi } : {}) });
  }
  return out;
}

function seriesPoints(
  records: readonly BenchServingRecord[] | undefined,
  series: string,
  pick: (r: BenchServingRecord) => number | null | undefined,
): Point[] {
  const out: Point[] = [];
  for (const r of records ?? []) {
    const v = pick(r);
    if (r.max_concurrency !== null && v !== null && v !== undefined && Number.isFinite(v))
      out.push({ concurrency: r.max_concurrency, series, value: v });
  }
  return out;
}

function lineChart(
  id: string,
  title: string,
  yTitle: string,
  points: Point[],
  concurrencies: number[],
  colors: Record<string, string>,
  rule?: number,
  simulated?: string,
): ChartSpec {
  const series = Object.keys(colors);
  const x = {
    field: 'concurrency',
    type: 'quantitative',
    title: 'concurrency (requests in flight)',
    scale: { type: 'log', domain: [Math.min(...concurrencies), Math.max(...concurrencies)], nice: false },
    axis: { values: concurrencies, format: 'd', grid: true },
  };
  const color = {
    field: 'series',
    type: 'nominal',
    title: null,
    scale: { domain: series, range: series.map((s) => colors[s]!) },
    legend: series.length > 1 ? { orient: 'top', direction: 'horizontal', labelLimit: 300 } : null,
  };
  const bars = points.some((p) => p.lo !== undefined);
  // The title is the HTML figure's caption, not drawn twice; a simulated report's charts carry
  // the label inside the SVG too, so a chart copied out of the page still says so.
  const line: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    description: simulated ? `${SIMULATED_LABEL}: ${title}` : title,
    ...(simulated
      ? { title: { text: `${SIMULATED_LABEL} (${simulated})`, color: '#b42318', fontSize: 13, anchor: 'start' } }
      : {}),
    width: WIDTH,
    height: HEIGHT,
    data: { values: points },
    layer: [
      {
        mark: { type: 'line', point: { filled: true, size: 50 }, strokeWidth: 2 },
        encoding: {
          x,
          y: { field: 'value', type: 'quantitative', title: yTitle, scale: { zero: rule === undefined } },
          color,
        },
      },
      ...(bars
        ? [
            {
              transform: [{ filter: 'isValid(datum.lo)' }],
              mark: { type: 'rule' as const, strokeWidth: 1.5 },
              encoding: { x, y: { field: 'lo', type: 'quantitative' }, y2: { field: 'hi' }, color },
            },
          ]
        : []),
      ...(rule === undefined
        ? []
        : [
            { mark: { type: 'rule' as const, strokeDash: [4, 4], color: '#d62728' }, encoding: { y: { datum: rule } } },
          ]),
    ],
  } as TopLevelSpec;
  return { id, title, spec: line };
}

/** The five charts of the report; a chart with no data at all is left out. */
export function chartSpecs(input: ReportInput): ChartSpec[] {
  const label = input.speculativeLabel ?? 'EAGLE3';
  const rows = pairByConcurrency(input);
  const concurrencies = rows.map((r) => r.concurrency).filter((c): c is number => c !== null);
  if (concurrencies.length === 0) return [];
  const both = { baseline: BASELINE_COLOR, [label]: SPECULATIVE_COLOR };
  const pair = (pick: (r: BenchServingRecord) => number | null | undefined): Point[] => [
    ...seriesPoints(input.baseline, 'baseline', pick),
    ...seriesPoints(input.speculative, label, pick),
  ];
  const speedups: Point[] = [];
  for (const r of rows) {
    const s = speedupOf(r);
    if (s && r.concurrency !== null)
      speedups.push({
        concurrency: r.concurrency,
        series: 'speedup',
        value: s.median,
        ...(s.n >= 2 ? { lo: s.lo, hi: s.hi } : {}),
      });
  }
  const accept = [
    ...seriesPoints(input.speculative, 'pooled (Σ tokens ÷ Σ verify steps)', (r) => r.accept_length_pooled),
    ...seriesPoints(input.speculative, 'per-request mean (meta_info)', (r) => r.mean_accept_length_per_request),
    ...seriesPoints(input.speculative, 'server average (server_info)', (r) => r.accept_length),
  ];
  const sim = simulatedOf(input);
  const rounds = (metric: RoundMetric): Point[] => [
    ...roundPoints(input.baseline, 'baseline', metric),
    ...roundPoints(input.speculative, label, metric),
  ];
  const charts = [
    lineChart(
      'throughput',
      'Output throughput',
      'output tokens / s',
      rounds('output_throughput'),
      concurrencies,
      both,
      undefined,
      sim,
    ),
    lineChart(
      'speedup',
      `Speedup (${label} ÷ baseline output throughput)`,
      'speedup ×',
      speedups,
      concurrencies,
      { speedup: SPECULATIVE_COLOR },
      1,
      sim,
    ),
    lineChart(
      'accept-length',
      'Accept length',
      'tokens per verify step',
      accept,
      concurrencies,
      {
        'pooled (Σ tokens ÷ Σ verify steps)': '#2ca02c',
        'per-request mean (meta_info)': SPECULATIVE_COLOR,
        'server average (server_info)': '#ff7f0e',
      },
      undefined,
      sim,
    ),
    // The percentile's definition rides in the caption, next to the figure (numpy-stats.ts).
    lineChart(
      'ttft',
      'p99 time to first token (numpy.percentile, linear)',
      'p99 TTFT (ms)',
      rounds('p99_ttft_ms'),
      concurrencies,
      both,
      undefined,
      sim,
    ),
    lineChart(
      'itl',
      'p99 inter-token latency (numpy.percentile, linear)',
      'p99 ITL (ms)',
      rounds('p99_itl_ms'),
      concurrencies,
      both,
      undefined,
      sim,
    ),
  ];
  return charts
    .filter((c) => (c.spec as { data: { values: unknown[] } }).data.values.length > 0)
    .map((c) => (sim ? { ...c, title: `${SIMULATED_LABEL}: ${c.title}` } : c));
}

/** Vega's ids (clip paths, gradients) made unique per chart: `id="x"` → `id="<prefix>-x"`, and every reference to them. */
export function scopeSvgIds(svg: string, prefix: string): string {
  const ids = new Set<string>();
  for (const m of svg.matchAll(/\sid="([^"]+)"/g)) ids.add(m[1]!);
  if (ids.size === 0) return svg;
  return svg
    .replace(/(\sid=")([^"]+)(")/g, (all, a: string, id: string, b: string) =>
      ids.has(id) ? `${a}${prefix}-${id}${b}` : all,
    )
    .replace(/url\(#([^)]+)\)/g, (all, id: string) => (ids.has(id) ? `url(#${prefix}-${id})` : all))
    .replace(/(href=")#([^"]+)(")/g, (all, a: string, id: string, b: string) =>
      ids.has(id) ? `${a}#${prefix}-${id}${b}` : all,
    );
}

export async function renderChartSvg(spec: TopLevelSpec): Promise<string> {
  // Loaded only when a report is drawn: vega and vega-lite hold ~45 MB resident once imported.
  const [vega, vl] = await Promise.all([import('vega'), import('vega-lite')]);
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

export async function renderCharts(input: ReportInput): Promise<RenderedChart[]> {
  const out: RenderedChart[] = [];
  for (const c of chartSpecs(input)) {
    out.push({ id: c.id, title: c.title, svg: scopeSvgIds(await renderChartSvg(c.spec), `chart-${c.id}`) });
  }
  return out;
}
