/** bench/client-vs-bench-serving.ts's figures per client and level, and the printed comparison. */
import { cpus, loadavg } from 'node:os';
import { distribution } from '../../src/bench/metrics.js';
import type { ChildResult } from './children.js';

export interface Figures {
  achieved: number;
  overheadP50: number;
  overheadP99: number;
  cpuUsPerToken: number;
  rssMb: number;
  failed: number;
  unreported: number;
  tokens: number;
  windowS: number;
}

export function figures(r: ChildResult): Figures {
  const reqs = r.reqs ?? [];
  const ok = reqs.filter((q) => q.ok);
  // Clocks differ by a few µs between processes; a negative gap is measurement noise.
  const gaps =
    r.summary?.gapsMs.map((g) => Math.max(0, g)) ??
    ok.filter((q) => q.serverE2eMs !== null).map((q) => Math.max(0, q.e2eMs - q.serverE2eMs!));
  const tokens = r.summary?.tokens ?? ok.reduce((s, q) => s + q.outputTokens, 0);
  const sumE2e = r.summary?.sumE2eMs ?? ok.reduce((s, q) => s + q.e2eMs, 0);
  const d = distribution(gaps);
  return {
    achieved: r.windowMs > 0 ? sumE2e / r.windowMs : 0,
    overheadP50: d.median,
    overheadP99: d.p99,
    cpuUsPerToken: tokens > 0 ? r.cpuUs / tokens : 0,
    rssMb: r.vmHwmKb / 1024,
    failed: reqs.length - ok.length,
    unreported: r.summary ? 0 : ok.length - gaps.length,
    tokens,
    windowS: r.windowMs / 1000,
  };
}

export interface Row {
  c: number;
  n: number;
  aerie: Figures;
  bs: Figures;
  ref: Figures;
  order: string;
}

export function report(rows: Row[], outputLen: number, inputLen: number): string {
  const f2 = (v: number): string => v.toFixed(2);
  const ratio = (a: number, b: number): string => (b > 0 ? (a / b).toFixed(2) : a === 0 ? '1.00' : '∞');
  const lines = [
    `aerie load generator vs sglang.bench_serving 0.5.4: ${outputLen}-token /generate streams, ${inputLen}-word prompts (ShareGPT file), simulator at zero model delay`,
    `date ${new Date().toISOString()}, machine: ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
    '',
  ];
  for (const r of rows) {
    lines.push(`C=${r.c}: ${r.n} requests each (${r.order})`);
    for (const [name, f] of [
      ['aerie', r.aerie],
      ['bench_serving', r.bs],
      ['reference', r.ref],
    ] as const) {
      lines.push(
        `  ${name.padEnd(13)} achieved ${f2(f.achieved)}  overhead p50 ${f2(f.overheadP50)} ms p99 ${f2(f.overheadP99)} ms  CPU ${f2(f.cpuUsPerToken)} µs/token  peak RSS ${f.rssMb.toFixed(0)} MB  (${f.tokens} tokens in ${f2(f.windowS)} s, ${f.failed} failed, ${f.unreported} without e2e_latency)`,
      );
    }
  }
  lines.push('', 'ratio aerie / bench_serving (achieved concurrency: higher is better; the rest: lower is better)', '');
  lines.push(
    '| C | achieved concurrency | overhead p50 | overhead p99 | CPU per output token | peak RSS |',
    '|---|---|---|---|---|---|',
  );
  for (const { c, aerie: a, bs: b } of rows) {
    lines.push(
      `| ${c} | ${ratio(a.achieved, b.achieved)} (${f2(a.achieved)} / ${f2(b.achieved)}) | ${ratio(a.overheadP50, b.overheadP50)} (${f2(a.overheadP50)} / ${f2(b.overheadP50)} ms) | ${ratio(a.overheadP99, b.overheadP99)} (${f2(a.overheadP99)} / ${f2(b.overheadP99)} ms) | ${ratio(a.cpuUsPerToken, b.cpuUsPerToken)} (${f2(a.cpuUsPerToken)} / ${f2(b.cpuUsPerToken)} µs) | ${ratio(a.rssMb, b.rssMb)} (${a.rssMb.toFixed(0)} / ${b.rssMb.toFixed(0)} MB) |`,
    );
  }
  lines.push(
    '',
    'floor: the do-nothing reference client (bench/reference-client.ts) at the same level, overhead p50 / p99',
    '',
  );
  for (const { c, ref } of rows)
    lines.push(
      `  C=${c}: ${f2(ref.overheadP50)} / ${f2(ref.overheadP99)} ms, achieved ${f2(ref.achieved)}, CPU ${f2(ref.cpuUsPerToken)} µs/token`,
    );
  return lines.join('\n') + '\n';
}
