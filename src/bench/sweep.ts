// The concurrency sweep for one variant (the drafter, or the target alone): levels in
// order, each measured once and stored, so a retried or resumed sweep continues at the
// first level without a stored result. No Temporal here: the activity wraps it with
// heartbeats, tests drive it against the simulator directly.

import { createHash } from 'node:crypto';
import type { Host } from '../hosts/host.js';
import { formatJsonLine, parseJsonLine } from './python-json.js';
import { benchServingRules, serverVersionOf } from './bench-rules.js';
import { runLevel } from './loadgen.js';
import { summarizeLevel, type BenchServingRecord, type SummaryMeta } from './metrics.js';
import { tokenizePrompts, type PromptCounts } from './tokenize.js';
import type { BenchApi } from './types.js';

export type Variant = 'eagle3' | 'baseline';

export interface LevelDone {
  concurrency: number;
  outputThroughput: number;
  acceptLength: number | null;
  errors: number;
  /** Read back from an earlier attempt rather than measured now. */
  stored: boolean;
}

/** What the CLI's progress bar shows (sent as heartbeat details). */
export interface SweepProgress {
  variant: Variant;
  /** 1-based position of the current level in the sweep. */
  level: number;
  levels: number;
  concurrency: number;
  done: number;
  total: number;
  finished: LevelDone[];
}

export interface LevelStore {
  read(concurrency: number): Promise<BenchServingRecord | undefined>;
  write(concurrency: number, record: BenchServingRecord): Promise<void>;
}

export interface LevelJob {
  concurrency: number;
  prompts: string[];
  signal?: AbortSignal;
  onProgress: (done: number, total: number) => void;
}

/** Measures one level; the sweep flushes nothing itself, each driver knows when to. */
export type MeasureLevel = (job: LevelJob) => Promise<BenchServingRecord>;

export interface SweepOptions {
  variant: Variant;
  concurrencies: readonly number[];
  promptsFor: (concurrency: number) => string[];
  store: LevelStore;
  measure: MeasureLevel;
  signal?: AbortSignal;
  onProgress?: (p: SweepProgress) => void;
}

export async function runSweep(o: SweepOptions): Promise<BenchServingRecord[]> {
  const records: BenchServingRecord[] = [];
  const finished: LevelDone[] = [];
  const report = (p: Omit<SweepProgress, 'variant' | 'levels' | 'finished'>): void => {
    try {
      o.onProgress?.({ variant: o.variant, levels: o.concurrencies.length, finished: [...finished], ...p });
    } catch {
      // Progress must never stop a measurement.
    }
  };
  for (const [i, concurrency] of o.concurrencies.entries()) {
    o.signal?.throwIfAborted();
    let record = await o.store.read(concurrency);
    const stored = record !== undefined;
    if (!record) {
      const prompts = o.promptsFor(concurrency);
      report({ level: i + 1, concurrency, done: 0, total: prompts.length });
      record = await o.measure({
        concurrency,
        prompts,
        signal: o.signal,
        onProgress: (done, total) => report({ level: i + 1, concurrency, done, total }),
      });
      await o.store.write(concurrency, record);
    }
    records.push(record);
    finished.push({
      concurrency,
      outputThroughput: record.output_throughput,
      acceptLength: record.mean_accept_length_per_request ?? record.accept_length,
      errors: record.errors ?? 0,
      stored,
    });
    report({ level: i + 1, concurrency, done: record.completed, total: record.completed + (record.errors ?? 0) });
  }
  return records;
}

/** Control calls the aerie driver makes around each level. */
export interface LevelControl {
  flushCache(signal?: AbortSignal): Promise<unknown>;
  serverInfo(signal?: AbortSignal): Promise<Record<string, unknown>>;
}

export interface AerieDriverOptions {
  baseUrl: string;
  api: BenchApi;
  outputLen: number;
  warmup: number;
  model?: string;
  control: LevelControl;
  /** Reads the server's running accept length from server_info (speculative servers only). */
  acceptLengthFrom?: (serverInfo: Record<string, unknown>) => number | undefined;
  meta: Omit<SummaryMeta, 'acceptLength' | 'rules' | 'promptLens'>;
  /** The release aerie resolved for the server, used when its /server_info names none. */
  serverVersion?: string;
  /**
   * Token counts by the server's tokenizer: prompts with special tokens (bench_serving's
   * prompt_len, chat), answers without (its retokenized output). Default SGLang's /tokenize at baseUrl.
   */
  countTokens?: (texts: readonly string[], addSpecialTokens: boolean, signal?: AbortSignal) => Promise<PromptCounts>;
}

/**
 * aerie's own load generator: /server_info for the release whose bench_serving rules the
 * level follows, on chat bench_serving's input token counts (tokenize.ts), warmup, then
 * /flush_cache (so the server's running accept length covers the measured requests only),
 * the closed loop, then, after the clock stopped, the answers' retokenized counts and
 * /server_info (reading either inside the duration would skew throughput).
 */
export function aerieDriver(o: AerieDriverOptions): MeasureLevel {
  return async (job) => {
    const before = await o.control.serverInfo(job.signal).catch(() => undefined);
    const rules = benchServingRules(serverVersionOf(before) ?? o.serverVersion);
    const count =
      o.countTokens ?? ((texts, addSpecialTokens, s) => tokenizePrompts(o.baseUrl, texts, s, { addSpecialTokens }));
    const counts = o.api === 'chat' ? await count(job.prompts, true, job.signal) : undefined;
    const run = await runLevel({
      baseUrl: o.baseUrl,
      api: o.api,
      prompts: job.prompts,
      concurrency: job.concurrency,
      outputLen: o.outputLen,
      warmup: o.warmup,
      signal: job.signal,
      model: o.model,
      onProgress: job.onProgress,
      rules,
      beforeMeasure: async () => void (await flushWhenIdle(o.control, job.signal)),
    });
    // After the clock: the answers' retokenized counts, then the server's running accept length.
    const answers = await count(
      run.results.map((r) => r.generatedText ?? ''),
      false,
      job.signal,
    );
    let acceptLength: number | undefined;
    if (o.acceptLengthFrom) {
      const info = await o.control.serverInfo(job.signal).catch(() => undefined);
      acceptLength = info ? o.acceptLengthFrom(info) : undefined;
    }
    return summarizeLevel(run, {
      ...o.meta,
      acceptLength,
      rules,
      promptLens: counts?.lens,
      outputLensRetokenized: answers.lens,
    });
  };
}

/** SGLang answers 400 to a flush while requests are still finishing: retry briefly, then go on without. */
export async function flushWhenIdle(
  control: Pick<LevelControl, 'flushCache'>,
  signal?: AbortSignal,
  attempts = 5,
  pauseMs = 200,
): Promise<boolean> {
  for (let i = 0; i < attempts; i++) {
    signal?.throwIfAborted();
    try {
      await control.flushCache(signal);
      return true;
    } catch {
      if (i < attempts - 1) await new Promise((r) => setTimeout(r, pauseMs));
    }
  }
  return false;
}

/**
 * Identity of a level's settings: a stored level is reused only when everything that
 * shapes its numbers is unchanged (server command line, drafter, prompts, lengths, api).
 */
export function levelKey(parts: Record<string, unknown>): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 12);
}

/** Levels stored as one bench_serving-style JSON line each, under the run's bench folder on the host. */
export function hostLevelStore(host: Host, dir: string, variant: Variant, key: string): LevelStore {
  const path = (c: number): string => `${dir}/levels/${variant}-c${c}-${key}.json`;
  return {
    async read(c) {
      if (!(await host.stat(path(c)))) return undefined;
      try {
        return parseJsonLine((await host.readFile(path(c))).toString('utf8').trim()) as BenchServingRecord;
      } catch {
        return undefined; // a damaged file is measured again
      }
    },
    async write(c, record) {
      await host.mkdirp(`${dir}/levels`);
      await host.writeFileAtomic(path(c), formatJsonLine(record) + '\n');
    },
  };
}
