/**
 * The benchmark stage's activities end to end on the simulator, outside Temporal: the
 * target alone and the EAGLE3 drafter launched through the server activities, the
 * default 8-level sweep for both, the report written on the host, and `aerie report`
 * copying it into a local run folder.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { benchmarkActivities, type ReportResult, type SweepResult } from '../../src/activities/benchmark.js';
import { serverActivities, type ServerLaunch } from '../../src/activities/server.js';
import { parseJsonLine } from '../../src/bench/python-json.js';
import { BENCH_SERVING_KEYS } from '../../src/bench/metrics.js';
import { renderSweepProgress } from '../../src/bench/progress.js';
import { reportCommand } from '../../src/cli/report.js';
import type { Config } from '../../src/config/schema.js';
import { HostPool } from '../../src/hosts/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { simDrafter } from '../../bench/sim-process.js';
import { inActivity } from '../bench/activity-context.js';
import { demoConfig } from '../support/demo-config.js';
import { useWorkdir } from '../support/workdir.js';

const LEVELS = [1, 2, 5, 10, 30, 70, 100, 250];
/** bench_serving writes null for these when they do not apply; every other field is a number or string. */
const NULLABLE = new Set(['sharegpt_output_len', 'accept_length']);

const tmp = useWorkdir('aerie-report-sweep-');
let config: Config;
const hosts = new HostPool();
const runId = `report-sweep-${Date.now()}`;
const servers = serverActivities({ hosts });
const bench = benchmarkActivities({ hosts });
const live: ServerLaunch[] = [];
let baseline: SweepResult;
let eagle3: SweepResult;
let report: ReportResult;
const heartbeats: unknown[] = [];

async function serve(
  role: 'baseline' | 'deploy',
  extra: { drafterDir?: string; maxConcurrency?: number } = {},
): Promise<ServerLaunch> {
  const launch = await inActivity(() => servers.launchServer({ runId, config, role, ...extra }));
  live.push(launch);
  await inActivity(() => servers.awaitServerReady({ runId, config, launch }));
  return launch;
}

async function stop(launch: ServerLaunch): Promise<void> {
  await inActivity(() => servers.stopServer({ runId, config, launch }));
  live.splice(live.indexOf(launch), 1);
}

beforeAll(async () => {
  config = demoConfig(join(tmp.path, 'host'), await freePort(), (c) => {
    c.stages.benchmark.concurrencies = LEVELS;
    c.stages.benchmark['output-len'] = 32;
    c.stages.benchmark['input-len'] = 32;
  });
  const drafterDir = await simDrafter(3, tmp.path);

  const base = await serve('baseline');
  baseline = await inActivity(() => bench.benchmarkSweep({ runId, config, launch: base, variant: 'baseline' }), {
    heartbeats,
    abort: new AbortController(),
  });
  await stop(base);

  const spec = await serve('deploy', { drafterDir, maxConcurrency: 250 });
  eagle3 = await inActivity(() => bench.benchmarkSweep({ runId, config, launch: spec, variant: 'eagle3' }), {
    heartbeats,
    abort: new AbortController(),
  });
  await stop(spec);

  report = await inActivity(() =>
    bench.writeReport({
      runId,
      config,
      speculative: eagle3.records,
      baseline: baseline.records,
      notes: ['a note from the gate'],
    }),
  );
}, 180_000);

afterAll(async () => {
  for (const l of [...live]) await stop(l).catch(() => undefined);
  await hosts.closeAll();
});

describe('benchmark stage on the simulator', () => {
  it('measures all 8 levels for both variants and reports speedup and accept length for each', () => {
    expect(baseline.records.map((r) => r.max_concurrency)).toEqual(LEVELS);
    expect(eagle3.records.map((r) => r.max_concurrency)).toEqual(LEVELS);
    for (const r of [...baseline.records, ...eagle3.records]) {
      expect(r.errors).toBe(0);
      expect(r.completed).toBe(Math.max(8, r.max_concurrency!));
      expect(r.rounds).toHaveLength(3);
    }
    for (const r of eagle3.records) expect(r.mean_accept_length_per_request).toBeGreaterThan(2);
    const rows = report.table.split('\n').filter((l) => /^\s+\d+\s/.test(l));
    expect(rows).toHaveLength(8);
    for (const row of rows) {
      const cells = row.trim().split(/\s{2,}/);
      expect(cells[3]).toMatch(/^\d+\.\d\d× \[\d+\.\d\d–\d+\.\d\d\]( \?)?$/); // speedup, median [interval], ? when undecided
      expect(cells[4]).toMatch(/^\d\.\d\d$/); // accept length, pooled
      expect(cells[5]).toMatch(/^\d\.\d\d$/); // accept length, per-request mean
    }
  });

  it('writes results.jsonl where every line carries every bench_serving field', async () => {
    const [, , jsonl] = report.paths;
    const text = await readFile(jsonl!, 'utf8');
    const lines = text.trimEnd().split('\n');
    expect(lines).toHaveLength(16);
    for (const line of lines) {
      const row = parseJsonLine(line) as Record<string, unknown>;
      for (const key of BENCH_SERVING_KEYS) {
        expect(row, key).toHaveProperty(key);
        const v = row[key];
        if (key === 'backend' || key === 'dataset_name') expect(typeof v, key).toBe('string');
        else if (NULLABLE.has(key) && v === null) continue;
        else expect(typeof v === 'number' && !Number.isNaN(v), `${key} = ${String(v)}`).toBe(true);
      }
      expect(row.request_rate).toBe(Infinity);
      expect(line).toContain('"request_rate": Infinity');
      expect(['baseline', 'eagle3']).toContain(row.aerie_variant);
    }
    const eagleLines = lines
      .map((l) => parseJsonLine(l) as Record<string, unknown>)
      .filter((r) => r.aerie_variant === 'eagle3');
    // Per request from meta_info on every level; the server's running average (bench_serving's
    // accept_length) only where the level ran decode-log-interval steps, as in SGLang.
    expect(eagleLines.every((r) => (r.mean_accept_length_per_request as number) > 1.5)).toBe(true);
    expect(eagleLines.every((r) => r.accept_length === null || (r.accept_length as number) > 1.5)).toBe(true);
    expect(eagleLines.some((r) => typeof r.accept_length === 'number')).toBe(true);
  });

  it('writes report.md and a report.html with the charts, and heartbeats a progress bar per level', async () => {
    const md = await readFile(report.paths[0]!, 'utf8');
    expect(md).toContain('- a note from the gate');
    expect(md).toContain('## EAGLE3: every level');
    const html = await readFile(report.paths[1]!, 'utf8');
    expect(html.match(/<svg /g)).toHaveLength(5);
    const last = heartbeats.filter((h) => (h as { variant?: string }).variant === 'eagle3').at(-1);
    expect(renderSweepProgress(last)).toMatch(
      /^eagle3 level 8\/8, concurrency 250 ▕█+▏ 750\/750 requests\n\s+done, output tok\/s: c1 .* c250 /,
    );
  });

  it('a retried sweep finds every level stored and measures nothing, even with its server gone', async () => {
    const stored = await inActivity(() => bench.storedSweep({ runId, config, variant: 'baseline' }));
    expect(stored.missing).toEqual([]);
    expect(stored.records).toEqual(baseline.records);
    const launch = await serve('baseline');
    await stop(launch); // its process is gone now
    const again = await inActivity(() => bench.benchmarkSweep({ runId, config, launch, variant: 'baseline' }));
    expect(again.records).toEqual(baseline.records);
  });

  it('`aerie report` copies the files from the host into the run folder and prints the table and paths', async () => {
    const folder = join(tmp.path, 'local-run');
    let out = '';
    const code = await reportCommand(runId, {
      folder,
      out: { write: (s: string) => (out += s) },
      hosts,
      lookup: async () => ({ status: 'COMPLETED', config, result: { runId, stages: [], report } }),
    });
    expect(code).toBe(0);
    expect(out).toContain(report.table.trimEnd());
    for (const name of ['report.md', 'report.html', 'results.jsonl']) {
      expect(out).toContain(join(folder, name));
      expect(await readFile(join(folder, name), 'utf8')).toBe(await readFile(`${report.dir}/${name}`, 'utf8'));
    }
    expect(out).toContain(`on host local:\n`);

    // Second time: answered from the local folder alone.
    let again = '';
    expect(
      await reportCommand(runId, {
        folder,
        out: { write: (s: string) => (again += s) },
        lookup: () => Promise.reject(new Error('not asked')),
      }),
    ).toBe(0);
    expect(again).toBe(out);
  });
});
