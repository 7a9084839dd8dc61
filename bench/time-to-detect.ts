/**
 * How long after a model server dies during its load does aerie know? Runs the real
 * pipeline workflow (own Temporal dev server, in-process worker, simulator processes) with
 * AERIE_SIM_FAULT=exit-during-load, for each readiness poll interval, and measures for every
 * launch the time from the server's exit (the launch wrapper's .exit file) to the failure of
 * the awaitServerReady activity (its ActivityTaskFailed event in the history).
 *
 *   npx tsx bench/time-to-detect.ts [--intervals 1,2,5] [--runs 3] 2>/dev/null   (stderr: the worker's warnings)
 *
 * Each run launches the server three times (a generic crash is relaunched), so a run gives
 * three samples. The load length is drawn at random per run so the exit falls at a random
 * point of the poll cycle. The bound the issue sets is two poll intervals.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../src/temporal/dev-server.js';
import { startTestTemporal } from '../test/support/temporal.js';
import { detectionDelays, faultConfig, median, runPipeline } from '../test/server/harness.js';

const { values } = parseArgs({
  options: {
    intervals: { type: 'string', default: '1,2,5' },
    runs: { type: 'string', default: '3' },
  },
});
const intervals = values.intervals.split(',').map((s) => Number(s.trim()));
const runs = Number(values.runs);

const t = await startTestTemporal();
const work = await mkdtemp(join(tmpdir(), 'aerie-ttd-'));
const rows: string[][] = [];
try {
  for (const seconds of intervals) {
    const pollMs = Math.round(seconds * 1000);
    const delays: number[] = [];
    for (let i = 0; i < runs; i++) {
      const workdir = join(work, `p${seconds}-${i}`);
      // The exit comes ~17 × scale s after the start; spread it over at least one poll cycle.
      const scale = (0.03 + Math.random() * Math.max(0.06, (1.2 * seconds) / 17)).toFixed(3);
      const config = faultConfig(
        workdir,
        await freePort(),
        { AERIE_SIM_FAULT: 'exit-during-load', AERIE_SIM_TIME_SCALE: scale },
        (c) => {
          c.server.readiness['poll-interval'] = pollMs;
        },
      );
      const runId = `ttd-${seconds}s-${i}-${Date.now()}`;
      const run = await runPipeline(t, config, runId);
      const found = await detectionDelays(workdir, run.activities, ['awaitServerReady']);
      delays.push(...found.map((d) => d.delayMs));
      console.log(
        `poll ${seconds} s, run ${i + 1}/${runs}: ${found.map((d) => `${Math.round(d.delayMs)} ms`).join(', ')}`,
      );
    }
    const sorted = [...delays].sort((a, b) => a - b);
    rows.push([
      `${seconds} s`,
      String(delays.length),
      `${Math.round(median(delays))} ms`,
      `${Math.round(sorted[0]!)} ms`,
      `${Math.round(sorted[sorted.length - 1]!)} ms`,
      `${2 * pollMs} ms`,
      sorted[sorted.length - 1]! <= 2 * pollMs ? 'yes' : 'NO',
    ]);
  }
} finally {
  await t.stop();
  await rm(work, { recursive: true, force: true });
}

const header = ['poll interval', 'samples', 'median', 'min', 'max', 'bound (2 polls)', 'within bound'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
console.log(
  `time from server exit (crash during load) to awaitServerReady failing; ${cpus().length} CPUs, load ${loadavg()[0]!.toFixed(2)}`,
);
console.log(line(header));
console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
for (const r of rows) console.log(line(r));
process.exit(rows.every((r) => r[6] === 'yes') ? 0 : 1);
