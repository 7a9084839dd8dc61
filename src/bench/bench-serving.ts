// The bench_serving driver: instead of aerie's load generator, run SGLang's own
// `python -m sglang.bench_serving` on the host for each level and ingest the JSON line
// it appends, so a researcher can get numbers from the exact tool they already trust
// into the same report.
//
// Each level gets its own dataset file (the level's prompts as a ShareGPT array, so
// bench_serving never downloads anything) and its own output file. bench_serving's
// --dataset-name random draws token ids from that file's prompts to the exact
// --random-input-len (tokens, range ratio 1.0); conversation prompts go in as
// --dataset-name sharegpt with --sharegpt-output-len.

import type { Host } from '../hosts/host.js';
import { benchServingModule } from '../sglang/releases.js';
import { parseJsonLine } from './python-json.js';
import {
  AERIE_EXTRA_KEYS,
  BENCH_SERVING_KEYS,
  LATER_BENCH_SERVING_KEYS,
  orderedExtras,
  type AerieExtras,
  type BenchServingRecord,
} from './metrics.js';
import { simulatorOf } from './simulated.js';
import type { MeasureLevel } from './sweep.js';
import { flushWhenIdle, type LevelControl } from './sweep.js';
import type { BenchApi } from './types.js';

/** bench_serving's backend name for aerie's api setting. */
export function benchServingBackend(api: BenchApi): 'sglang' | 'sglang-oai-chat' {
  return api === 'generate' ? 'sglang' : 'sglang-oai-chat';
}

/**
 * bench_serving through the same interpreter as the server: `<python> -m
 * sglang.launch_server` becomes `<python> -m sglang.bench_serving`, or on a release where
 * that name is a deprecated alias printing a FutureWarning, its new module
 * `sglang.benchmark.serving` (S18; sglang==0.5.23:sglang/bench_serving.py:1-22, releases.ts
 * benchServingModule). Undefined when the server launcher is not of that form (then the
 * config must name one).
 */
export function defaultBenchServingLauncher(
  serverLauncher: readonly string[],
  sglangVersion?: string,
): string[] | undefined {
  const m = serverLauncher.indexOf('-m');
  if (m < 0 || serverLauncher[m + 1] !== 'sglang.launch_server') return undefined;
  return [...serverLauncher.slice(0, m), '-m', benchServingModule(sglangVersion)];
}

/**
 * The address bench_serving, run on the host beside the server (inside its container when
 * there is an exec prefix), dials: where the server listens, or loopback for a wildcard.
 */
export function benchServingHost(listenHost: string): string {
  if (listenHost === '0.0.0.0' || listenHost === '') return '127.0.0.1';
  if (listenHost === '::' || listenHost === '[::]') return '::1';
  return listenHost;
}

export interface BenchServingLevel {
  launcher: readonly string[];
  api: BenchApi;
  /** --host: see benchServingHost. */
  host: string;
  port: number;
  concurrency: number;
  numPrompts: number;
  outputLen: number;
  /** random: --random-input-len (tokens, for bench_serving). */
  inputLen: number;
  datasetName: 'random' | 'sharegpt';
  datasetPath: string;
  outputFile: string;
  warmup: number;
  seed: number;
  /** --model: the target's path on the host, so the tokenizer loads from disk, not the Hub. */
  model: string;
  extraArgs: readonly string[];
}

export function benchServingArgv(l: BenchServingLevel): string[] {
  const argv = [
    ...l.launcher,
    '--backend',
    benchServingBackend(l.api),
    '--host',
    l.host,
    '--port',
    String(l.port),
    '--model',
    l.model,
    '--dataset-name',
    l.datasetName,
    '--dataset-path',
    l.datasetPath,
    '--num-prompts',
    String(l.numPrompts),
    '--max-concurrency',
    String(l.concurrency),
    '--request-rate',
    'inf',
    '--seed',
    String(l.seed),
    '--output-file',
    l.outputFile,
    '--disable-tqdm',
  ];
  if (l.datasetName === 'random') {
    argv.push(
      '--random-input-len',
      String(l.inputLen),
      '--random-output-len',
      String(l.outputLen),
      '--random-range-ratio',
      '1.0',
    );
  } else {
    argv.push('--sharegpt-output-len', String(l.outputLen));
  }
  // Older bench_serving versions lack --warmup-requests and always send one.
  if (l.warmup !== 1) argv.push('--warmup-requests', String(l.warmup));
  argv.push(...l.extraArgs);
  return argv;
}

/** The level's prompts as the ShareGPT JSON array bench_serving reads (the answer turn is a placeholder). */
export function shareGptDataset(prompts: readonly string[]): string {
  return JSON.stringify(
    prompts.map((p) => ({
      conversations: [
        { from: 'human', value: p },
        { from: 'gpt', value: 'placeholder answer' },
      ],
    })),
  );
}

/** Keys a bench_serving line may lack and still be used: accept_length and concurrency came later. */
// The text/vision split of input tokens is written by 0.5.4 (sglang==0.5.4:sglang/bench_serving.py:2004-2005), not by every release.
const OPTIONAL_KEYS = new Set([
  'accept_length',
  'concurrency',
  'total_output_tokens_retokenized',
  'sharegpt_output_len',
  'random_range_ratio',
  'total_input_text_tokens',
  'total_input_vision_tokens',
]);

export class BenchServingOutputError extends Error {
  override readonly name = 'BenchServingOutputError';
}

/**
 * --output-details arrays left out of the record: the generated texts and every request's
 * ITL list run to megabytes per level; bench_serving's own output file on the host keeps them.
 */
export const DROPPED_DETAIL_KEYS = ['generated_texts', 'itls'] as const;

/**
 * One bench_serving result line (its file's last) as aerie's record: every key the line
 * has, with the value it wrote (bare Infinity included). 0.5.4's keys and the keys later
 * releases add (0.5.9's tag, server_info, total_throughput, p90_e2e_latency_ms,
 * max_output_tokens_per_s, max_concurrent_requests; 0.5.23's p90s and p95s: see
 * LATER_BENCH_SERVING_KEYS) keep their names, null where this release wrote none; any
 * other key (goodput, cache_report, --output-details arrays) goes under
 * bench_serving_other_fields, but for DROPPED_DETAIL_KEYS. aerie's own figures are null.
 */
export function ingestBenchServingLine(line: string, numPrompts: number, startedAt: string): BenchServingRecord {
  let raw: unknown;
  try {
    raw = parseJsonLine(line);
  } catch (err) {
    throw new BenchServingOutputError(
      `bench_serving wrote a line that is not JSON: ${(err as Error).message}: ${line.slice(0, 200)}`,
    );
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw))
    throw new BenchServingOutputError('bench_serving wrote a line that is not a JSON object');
  const r = raw as Record<string, unknown>;
  const missing = BENCH_SERVING_KEYS.filter((k) => !(k in r) && !OPTIONAL_KEYS.has(k));
  if (missing.length > 0)
    throw new BenchServingOutputError(
      `bench_serving's line lacks ${missing.join(', ')}: is this bench_serving's output?`,
    );
  const out: Record<string, unknown> = {};
  for (const k of [...BENCH_SERVING_KEYS, ...LATER_BENCH_SERVING_KEYS]) out[k] = k in r ? r[k] : null;
  const completed = typeof r.completed === 'number' ? r.completed : 0;
  const errors = Array.isArray(r.errors)
    ? (r.errors as unknown[]).filter((e): e is string => typeof e === 'string' && e.length > 0)
    : [];
  const named = new Set<string>([...BENCH_SERVING_KEYS, ...LATER_BENCH_SERVING_KEYS, ...DROPPED_DETAIL_KEYS]);
  const other: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r)) if (!named.has(k)) other[k] = v;
  const extras: AerieExtras = {
    ...(Object.fromEntries(AERIE_EXTRA_KEYS.map((k) => [k, null])) as unknown as AerieExtras),
    bench_serving_rules: 'bench_serving itself (its own release on the host)',
    errors: Math.max(0, numPrompts - completed),
    error_samples: [...new Set(errors.map((e) => e.trim().split('\n').pop()!.slice(0, 300)))].slice(0, 5),
    started_at: startedAt,
    bench_serving_other_fields: Object.keys(other).length > 0 ? other : null,
    // bench_serving 0.5.9+ copies the server's /server_info into its line (metrics.ts LATER_BENCH_SERVING_KEYS).
    server_simulated: simulatorOf(r.server_info),
  };
  return { ...out, ...orderedExtras(extras) } as unknown as BenchServingRecord;
}

/** The last non-blank line of bench_serving's output file (it appends one per run). */
export function lastLine(text: string): string | undefined {
  const lines = text.split(/\r?\n/).filter((l) => l.trim().length > 0);
  return lines[lines.length - 1];
}

export interface BenchServingDriverOptions {
  host: Host;
  /** Folder on the host for the per-level dataset, output and log files. */
  dir: string;
  variant: string;
  control: Pick<LevelControl, 'flushCache'>;
  level: Omit<BenchServingLevel, 'concurrency' | 'numPrompts' | 'datasetPath' | 'outputFile'>;
  timeoutMs: number;
}

/** Runs bench_serving once per level on the host and ingests its line. */
export function benchServingDriver(o: BenchServingDriverOptions): MeasureLevel {
  return async (job) => {
    const stem = `${o.dir}/bench_serving/${o.variant}-c${job.concurrency}-r${job.round ?? 0}`;
    await o.host.mkdirp(`${o.dir}/bench_serving`);
    await o.host.writeFileAtomic(`${stem}.dataset.json`, shareGptDataset(job.prompts));
    await o.host.remove(`${stem}.jsonl`).catch(() => undefined);
    const argv = benchServingArgv({
      ...o.level,
      concurrency: job.concurrency,
      numPrompts: job.prompts.length,
      datasetPath: `${stem}.dataset.json`,
      outputFile: `${stem}.jsonl`,
    });
    await flushWhenIdle(o.control, job.signal);
    const startedAt = new Date().toISOString();
    const res = await o.host.exec(argv, { timeoutMs: o.timeoutMs, signal: job.signal });
    await o.host.writeFileAtomic(`${stem}.log`, `$ ${argv.join(' ')}\n${res.stdout}\n${res.stderr}`);
    const text = (await o.host.stat(`${stem}.jsonl`)) ? (await o.host.readFile(`${stem}.jsonl`)).toString('utf8') : '';
    const line = lastLine(text);
    if (res.code !== 0 || !line) {
      const tail = (res.stderr || res.stdout).trim().split('\n').slice(-15).join('\n');
      throw new BenchServingOutputError(
        `bench_serving at concurrency ${job.concurrency} ${res.code !== 0 ? `exited with ${res.code ?? res.signal}` : 'wrote no result line'} (log: ${stem}.log)${tail ? `:\n${tail}` : ''}`,
      );
    }
    job.onProgress(job.prompts.length, job.prompts.length);
    return ingestBenchServingLine(line, job.prompts.length, startedAt);
  };
}
