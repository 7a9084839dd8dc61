/**
 * Is aerie's load generator ever the bottleneck? One closed-loop level against the
 * simulator with zero model delay (AERIE_SIM_DECODE_SCALE=0), so every millisecond the
 * client measures beyond the server's own e2e_latency was added outside the model.
 *
 *   npx tsx bench/client-overhead.ts [--concurrency 250] [--output-len 256] [--rounds 4] [--input-len 64]
 *
 * Targets (issue 6): overhead p99 < 1 ms, achieved concurrency ≥ 99% of target, peak RSS
 * of this process < 300 MB. To say who added the overhead it also reports:
 *   - the client's own event-loop delay (perf_hooks.monitorEventLoopDelay, 1 ms
 *     resolution): how late any socket callback of aerie's client ran, i.e. the most
 *     the client itself can have added to a timestamp;
 *   - the same level through a do-nothing reference client (reference-client.ts):
 *     the overhead no client can avoid against this server on this machine.
 * Exit code 1 when a target is missed.
 */
import { cpus, loadavg } from 'node:os';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { runLevel } from '../src/bench/loadgen.js';
import { distribution } from '../src/bench/metrics.js';
import { overheadFigures } from '../src/bench/overhead.js';
import { randomPrompts } from '../src/bench/prompts.js';
import { referenceLevel } from './reference-client.js';
import { SimServer } from './sim-process.js';

const { values } = parseArgs({
  options: {
    concurrency: { type: 'string', default: '250' },
    'output-len': { type: 'string', default: '256' },
    'input-len': { type: 'string', default: '64' },
    rounds: { type: 'string', default: '4' },
  },
});
const concurrency = Number(values.concurrency);
const outputLen = Number(values['output-len']);
const rounds = Number(values.rounds);
const ms = (v: number): string => `${v.toFixed(3)} ms`;

const sim = await SimServer.start({
  decodeScale: 0,
  args: ['--max-running-requests', String(Math.max(concurrency, 1))],
});
let missed = false;
try {
  const prompts = randomPrompts(concurrency * rounds, Number(values['input-len']), 7);
  // A first pass warms the JIT (tens of thousands of frames) and the server; only the second is reported.
  const warm = randomPrompts(Math.max(concurrency, 64), Number(values['input-len']), 8);
  await runLevel({ baseUrl: sim.baseUrl, api: 'generate', prompts: warm, concurrency, outputLen, warmup: 0 });
  await referenceLevel(sim.port, warm.slice(0, concurrency), concurrency, outputLen);

  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  loopDelay.enable();
  const run = await runLevel({ baseUrl: sim.baseUrl, api: 'generate', prompts, concurrency, outputLen, warmup: 0 });
  loopDelay.disable();
  const elu = performance.eventLoopUtilization(elu0).utilization;
  const cpu = process.cpuUsage(cpu0);
  const rssMb = process.resourceUsage().maxRSS / 1024;
  const f = overheadFigures(run);
  const frames = f.outputTokens; // the simulator sends one frame per token without speculation
  const cpuUsPerFrame = frames > 0 ? (cpu.user + cpu.system) / frames : 0;
  // monitorEventLoopDelay counts its own 1 ms timer period in each sample.
  const lagMs = (p: number): number => Math.max(0, loopDelay.percentile(p) / 1e6 - 1);

  const refCpu0 = process.cpuUsage();
  const ref = await referenceLevel(sim.port, prompts, concurrency, outputLen);
  const refCpu = process.cpuUsage(refCpu0);
  const refGap = distribution(ref.gapsMs.map((g) => Math.max(0, g)));

  const checks = [
    {
      name: 'client overhead p99 (client E2E − server e2e_latency)',
      value: ms(f.overheadMs.p99),
      ok: f.overheadMs.p99 < 1,
      target: '< 1 ms',
    },
    {
      name: 'achieved concurrency (Σ E2E / duration)',
      value: `${f.achievedConcurrency.toFixed(1)} = ${(f.achievedRatio * 100).toFixed(1)}%`,
      ok: f.achievedRatio >= 0.99,
      target: `≥ 99% of ${concurrency}`,
    },
    { name: 'peak RSS of this process', value: `${rssMb.toFixed(0)} MB`, ok: rssMb < 300, target: '< 300 MB' },
  ];
  const out = [
    `aerie client overhead: concurrency ${concurrency}, ${outputLen}-token /generate streams, ${prompts.length} requests, simulator at zero model delay`,
    `machine: ${cpus().length} CPUs, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
    '',
    `  ${f.requests} requests (${f.failed} failed) in ${f.durationS.toFixed(2)} s, ${f.outputThroughput.toFixed(0)} output tok/s, max in flight ${f.maxInFlight}`,
    `  overhead, aerie client:     mean ${ms(f.overheadMs.mean)}  median ${ms(f.overheadMs.median)}  p90 ${ms(f.overheadMs.p90)}  p99 ${ms(f.overheadMs.p99)}  max ${ms(f.overheadMs.max)}`,
    `  overhead, reference client: mean ${ms(refGap.mean)}  median ${ms(refGap.median)}  p90 ${ms(refGap.p90)}  p99 ${ms(refGap.p99)}  max ${ms(refGap.max)}  (achieved ${((ref.sumE2eMs / ref.durationMs / concurrency) * 100).toFixed(1)}%)`,
    `  aerie client event-loop delay: median ${ms(lagMs(50))}  p99 ${ms(lagMs(99))}  max ${ms(Math.max(0, loopDelay.max / 1e6 - 1))}`,
    `  aerie client CPU: ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s (${cpuUsPerFrame.toFixed(1)} µs per frame), event-loop utilisation ${(elu * 100).toFixed(0)}%`,
    `  reference client CPU: ${((refCpu.user + refCpu.system) / 1e6).toFixed(2)} s (${frames > 0 ? ((refCpu.user + refCpu.system) / frames).toFixed(1) : '0'} µs per frame)`,
    '',
    ...checks.map((c) => `  ${c.ok ? 'PASS' : 'MISS'} ${c.name}: ${c.value} (target ${c.target})`),
  ];
  process.stdout.write(out.join('\n') + '\n');
  missed = checks.some((c) => !c.ok) || f.failed > 0;
} finally {
  await sim.stop();
}
process.exit(missed ? 1 : 0);
