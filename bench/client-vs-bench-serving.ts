/**
 * aerie's load generator against real `sglang.bench_serving` 0.5.4 (the venv
 * scripts/setup-sglang-client.sh makes), side by side in one run, on the same simulator at
 * zero model delay (AERIE_SIM_DECODE_SCALE=0), at the same levels, with the same prompts:
 *
 *   npx tsx bench/client-vs-bench-serving.ts [--levels 1,64,250] [--output-len 256] [--input-len 48] [--rounds 4] [--c1-requests 200]
 *
 * Each client runs as its own child process per level, so CPU and peak RSS are that client's:
 *   - achieved concurrency: Σ client E2E / (first measured send → last measured completion),
 *     i.e. the mean number of requests in flight over the level;
 *   - client overhead: client E2E − the server's meta_info.e2e_latency, per request, p50/p99
 *     (src/bench/metrics.ts distribution() for both, so the percentiles are defined alike);
 *   - CPU per output token: user+sys of the client process from its first measured request
 *     to its last completion (warmup and start-up excluded), over the level's output tokens;
 *   - peak RSS: the client process's VmHWM at exit (start-up, tokenizer, runtime included).
 * bench_serving runs unmodified under a small Python wrapper (BENCH_SERVING_WRAPPER) that
 * records, per request, its own `latency` and the server's e2e_latency from the frames it
 * parses; that wrapper's cost falls on bench_serving's side (see the .md).
 * Exit code 1 when a client failed a request.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchServingArgv, shareGptDataset } from '../src/bench/bench-serving.js';
import { runLevel } from '../src/bench/loadgen.js';
import { distribution } from '../src/bench/metrics.js';
import { randomPrompts } from '../src/bench/prompts.js';
import { referenceLevel } from './reference-client.js';
import { SIM_MODEL, SimServer } from './sim-process.js';

const SELF = fileURLToPath(import.meta.url);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const PYTHON = join(REPO, '.venv-sglang-bench', 'bin', 'python');
const OFFLINE_ENV = { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', HF_HUB_DISABLE_TELEMETRY: '1' };
const WARMUP = 1; // bench_serving's default --warmup-requests; aerie gets the same
const SEED = 7;
const CHILD_TIMEOUT_MS = 90_000;

/** One measured request: client E2E and the server's own e2e_latency (ms). */
interface Req {
  e2eMs: number;
  serverE2eMs: number | null;
  ok: boolean;
  outputTokens: number;
}
/** What each client child writes to its result file (the reference client has no per-request records, only its gaps). */
interface ChildResult {
  reqs?: Req[];
  summary?: { gapsMs: number[]; sumE2eMs: number; tokens: number };
  windowMs: number;
  cpuUs: number;
  vmHwmKb: number;
}

// Runs sglang.bench_serving's own __main__ block in its own module namespace after wrapping
// the sglang backend's request function (sglang==0.5.4:sglang/bench_serving.py:506, looked up
// through ASYNC_REQUEST_FUNCS at :810 / :1712) and json.loads, which it calls once per frame
// (:557): the per-request latency it computes (:553, stored at :587) is kept, plus meta_info.e2e_latency of
// the frame that carries it. Nothing in how it sends, reads or times requests changes.
const BENCH_SERVING_WRAPPER = String.raw`
import contextvars, json, os, resource, sys, time
import sglang.bench_serving as bs
_cv = contextvars.ContextVar("aerie_rec", default=None)
_loads = json.loads
def _loads_noting_e2e(s, *a, **k):
    d = _loads(s, *a, **k)
    rec = _cv.get()
    if rec is not None and d.__class__ is dict:
        mi = d.get("meta_info")
        if mi is not None and "e2e_latency" in mi:
            rec[2] = mi["e2e_latency"]
    return d
json.loads = _loads_noting_e2e
WARMUP = int(os.environ["AERIE_BENCH_WARMUP"])
_orig = bs.ASYNC_REQUEST_FUNCS["sglang"]
_recs = []
_cpu = {}
def _cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
async def _recorded(request_func_input, pbar=None):
    if len(_recs) == WARMUP and "start" not in _cpu:
        _cpu["start"] = _cpu_s()
    rec = [time.perf_counter(), 0.0, None]
    tok = _cv.set(rec)
    try:
        out = await _orig(request_func_input=request_func_input, pbar=pbar)
    finally:
        _cv.reset(tok)
    rec[1] = time.perf_counter()
    _recs.append((rec[0], rec[1], out.latency, rec[2], bool(out.success), out.output_len))
    _cpu["end"] = _cpu_s()
    return out
bs.ASYNC_REQUEST_FUNCS["sglang"] = _recorded
src = open(bs.__file__).read()
main = src[src.index('if __name__ == "__main__":'):]
g = dict(vars(bs))
g["__name__"] = "__main__"
sys.argv = ["sglang.bench_serving"] + sys.argv[1:]
exec(compile(main, bs.__file__, "exec"), g)
m = _recs[WARMUP:]
hwm = 0
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        hwm = int(line.split()[1])
with open(os.environ["AERIE_BENCH_RESULT"], "w") as f:
    json.dump({
        "reqs": [{"e2eMs": r[2] * 1000, "serverE2eMs": None if r[3] is None else r[3] * 1000, "ok": r[4], "outputTokens": r[5]} for r in m],
        "windowMs": (max(r[1] for r in m) - min(r[0] for r in m)) * 1000 if m else 0,
        "cpuUs": (_cpu.get("end", 0) - _cpu.get("start", 0)) * 1e6,
        "vmHwmKb": hwm,
    }, f)
`;

function vmHwmKb(): number {
  const m = /^VmHWM:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Child mode: aerie's load generator at one level, its own figures to the result file. */
async function aerieChild(a: {
  url: string;
  dataset: string;
  concurrency: number;
  outputLen: number;
  result: string;
}): Promise<void> {
  const rows = JSON.parse(readFileSync(a.dataset, 'utf8')) as { conversations: { value: string }[] }[];
  const prompts = rows.map((r) => r.conversations[0]!.value);
  let cpu0 = process.cpuUsage();
  const run = await runLevel({
    baseUrl: a.url,
    api: 'generate',
    prompts,
    concurrency: a.concurrency,
    outputLen: a.outputLen,
    warmup: WARMUP,
    beforeMeasure: async () => {
      cpu0 = process.cpuUsage();
    },
  });
  const cpu = process.cpuUsage(cpu0);
  const out: ChildResult = {
    reqs: run.results.map((r) => ({
      e2eMs: r.e2eMs,
      serverE2eMs: r.serverE2eMs ?? null,
      ok: r.error === undefined,
      outputTokens: r.outputTokens,
    })),
    windowMs: run.durationMs,
    cpuUs: cpu.user + cpu.system,
    vmHwmKb: vmHwmKb(),
  };
  writeFileSync(a.result, JSON.stringify(out));
}

/** Child mode: the do-nothing reference client (reference-client.ts), the floor any client meets at this level. */
async function referenceChild(a: {
  port: number;
  dataset: string;
  concurrency: number;
  outputLen: number;
  result: string;
}): Promise<void> {
  const rows = JSON.parse(readFileSync(a.dataset, 'utf8')) as { conversations: { value: string }[] }[];
  const prompts = rows.map((r) => r.conversations[0]!.value);
  await referenceLevel(a.port, prompts.slice(0, WARMUP), WARMUP, Math.min(a.outputLen, 32));
  const cpu0 = process.cpuUsage();
  const run = await referenceLevel(a.port, prompts, a.concurrency, a.outputLen);
  const cpu = process.cpuUsage(cpu0);
  const out: ChildResult = {
    // It sends ignore_eos requests and checks only the last frame, so every request made outputLen tokens.
    summary: { gapsMs: run.gapsMs, sumE2eMs: run.sumE2eMs, tokens: prompts.length * a.outputLen },
    windowMs: run.durationMs,
    cpuUs: cpu.user + cpu.system,
    vmHwmKb: vmHwmKb(),
  };
  writeFileSync(a.result, JSON.stringify(out));
}

/** Run a child in its own process group; kill that group by its recorded pgid if it overruns. */
function runChild(argv: string[], env: Record<string, string>): Promise<{ code: number | null; log: string }> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(argv[0]!, argv.slice(1), {
      cwd: REPO,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let log = '';
    const keep = (d: Buffer): void => {
      log = (log + d.toString()).slice(-8000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }, CHILD_TIMEOUT_MS);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, log });
    });
  });
}

interface Figures {
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

function figures(r: ChildResult): Figures {
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

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      levels: { type: 'string', default: '1,64,250' },
      'output-len': { type: 'string', default: '256' },
      'input-len': { type: 'string', default: '48' },
      rounds: { type: 'string', default: '4' },
      'c1-requests': { type: 'string', default: '200' },
      // Child mode (internal).
      'aerie-child': { type: 'boolean', default: false },
      'reference-child': { type: 'boolean', default: false },
      port: { type: 'string' },
      url: { type: 'string' },
      dataset: { type: 'string' },
      concurrency: { type: 'string' },
      result: { type: 'string' },
    },
  });
  const outputLen = Number(values['output-len']);
  if (values['aerie-child']) {
    return aerieChild({
      url: values.url!,
      dataset: values.dataset!,
      concurrency: Number(values.concurrency),
      outputLen,
      result: values.result!,
    });
  }
  if (values['reference-child']) {
    return referenceChild({
      port: Number(values.port),
      dataset: values.dataset!,
      concurrency: Number(values.concurrency),
      outputLen,
      result: values.result!,
    });
  }
  if (!existsSync(join(REPO, '.venv-sglang-bench', '.aerie-pins')))
    throw new Error('.venv-sglang-bench is missing: run `bash scripts/setup-sglang-client.sh`');
  const levels = values.levels!.split(',').map(Number);
  const inputLen = Number(values['input-len']);
  const rounds = Number(values.rounds);
  const dir = mkdtempSync(join(tmpdir(), 'aerie-client-vs-bs-'));
  const wrapper = join(dir, 'bench_serving_recorded.py');
  writeFileSync(wrapper, BENCH_SERVING_WRAPPER);
  const maxC = Math.max(...levels);
  // No radix cache: the second client at a level must not find the first one's prefixes cached.
  const sim = await SimServer.start({
    decodeScale: 0,
    args: ['--max-running-requests', String(maxC), '--disable-radix-cache'],
  });
  const rowsOut: Row[] = [];
  let failed = false;
  try {
    for (const [li, c] of levels.entries()) {
      const n = c === 1 ? Number(values['c1-requests']) : c * rounds;
      const dataset = join(dir, `c${c}.dataset.json`);
      writeFileSync(dataset, shareGptDataset(randomPrompts(n, inputLen, SEED + c)));
      const runAerie = async (): Promise<Figures> => {
        const result = join(dir, `c${c}.aerie.json`);
        const res = await runChild(
          [
            process.execPath,
            '--import',
            'tsx',
            SELF,
            '--aerie-child',
            '--url',
            sim.baseUrl,
            '--dataset',
            dataset,
            '--concurrency',
            String(c),
            '--output-len',
            String(outputLen),
            '--result',
            result,
          ],
          {},
        );
        if (res.code !== 0 || !existsSync(result))
          throw new Error(`aerie child at C=${c} exited ${res.code}:\n${res.log}`);
        return figures(JSON.parse(readFileSync(result, 'utf8')) as ChildResult);
      };
      const runRef = async (): Promise<Figures> => {
        const result = join(dir, `c${c}.ref.json`);
        const res = await runChild(
          [
            process.execPath,
            '--import',
            'tsx',
            SELF,
            '--reference-child',
            '--port',
            String(sim.port),
            '--dataset',
            dataset,
            '--concurrency',
            String(c),
            '--output-len',
            String(outputLen),
            '--result',
            result,
          ],
          {},
        );
        if (res.code !== 0 || !existsSync(result))
          throw new Error(`reference child at C=${c} exited ${res.code}:\n${res.log}`);
        return figures(JSON.parse(readFileSync(result, 'utf8')) as ChildResult);
      };
      const runBs = async (): Promise<Figures> => {
        const result = join(dir, `c${c}.bs.json`);
        const argv = benchServingArgv({
          launcher: [PYTHON, wrapper],
          api: 'generate',
          host: '127.0.0.1',
          port: sim.port,
          concurrency: c,
          numPrompts: n,
          outputLen,
          inputLen,
          datasetName: 'sharegpt',
          datasetPath: dataset,
          outputFile: join(dir, `c${c}.bs.jsonl`),
          warmup: WARMUP,
          seed: SEED,
          model: SIM_MODEL,
          extraArgs: [],
        });
        const res = await runChild(argv, {
          ...OFFLINE_ENV,
          AERIE_BENCH_RESULT: result,
          AERIE_BENCH_WARMUP: String(WARMUP),
        });
        if (res.code !== 0 || !existsSync(result))
          throw new Error(`bench_serving at C=${c} exited ${res.code}:\n${res.log}`);
        return figures(JSON.parse(readFileSync(result, 'utf8')) as ChildResult);
      };
      // Alternate who goes first, so neither always meets a freshly idle server.
      const aerieFirst = li % 2 === 0;
      let aerie: Figures;
      let bs: Figures;
      if (aerieFirst) {
        aerie = await runAerie();
        bs = await runBs();
      } else {
        bs = await runBs();
        aerie = await runAerie();
      }
      // The floor last: it is context for the overhead figures, not one of the compared clients.
      const ref = await runRef();
      rowsOut.push({
        c,
        n,
        aerie,
        bs,
        ref,
        order: aerieFirst ? 'aerie, bench_serving, reference' : 'bench_serving, aerie, reference',
      });
      if (aerie.failed > 0 || bs.failed > 0) failed = true;
    }
  } finally {
    await sim.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(report(rowsOut, outputLen, inputLen));
  process.exit(failed ? 1 : 0);
}

interface Row {
  c: number;
  n: number;
  aerie: Figures;
  bs: Figures;
  ref: Figures;
  order: string;
}

function report(rows: Row[], outputLen: number, inputLen: number): string {
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

await main();
