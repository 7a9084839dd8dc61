/**
 * The client children of bench/client-vs-bench-serving.ts: each client runs as its own process
 * per level (so CPU and peak RSS are that client's) and writes its figures to a result file.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runLevel } from '../../src/bench/loadgen.js';
import { referenceLevel } from '../reference-client.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
export const WARMUP = 1; // bench_serving's default --warmup-requests; aerie gets the same
const CHILD_TIMEOUT_MS = 90_000;

/** One measured request: client E2E and the server's own e2e_latency (ms). */
export interface Req {
  e2eMs: number;
  serverE2eMs: number | null;
  ok: boolean;
  outputTokens: number;
}
/** What each client child writes to its result file (the reference client has no per-request records, only its gaps). */
export interface ChildResult {
  reqs?: Req[];
  summary?: { gapsMs: number[]; sumE2eMs: number; tokens: number };
  windowMs: number;
  cpuUs: number;
  vmHwmKb: number;
}

function vmHwmKb(): number {
  const m = /^VmHWM:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Child mode: aerie's load generator at one level, its own figures to the result file. */
export async function aerieChild(a: {
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
export async function referenceChild(a: {
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
export function runChild(argv: string[], env: Record<string, string>): Promise<{ code: number | null; log: string }> {
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
