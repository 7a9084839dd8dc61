// The concurrency sweep for one variant (the drafter, or the target alone): levels in
// order, each measured in R rounds (rounds.ts), every round stored as it ends, so a retried
// or resumed sweep continues at the first round without a stored result. No Temporal here: the activity wraps it with
// heartbeats, tests drive it against the simulator directly.

import { createHash } from 'node:crypto';
import type { Host } from '../hosts/host.js';
import { formatJsonLine, parseJsonLine } from './python-json.js';
import { benchServingRules, serverVersionOf } from './bench-rules.js';
import { runLevel } from './loadgen.js';
import { summarizeLevel, type BenchServingRecord, type SummaryMeta } from './metrics.js';
import { aggregateRounds, metricInterval } from './rounds.js';
import { simulatorOf } from './simulated.js';
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

/** One stored line per level and round (round 0 when left out). */
export interface LevelStore {
  read(concurrency: number, round?: number): Promise<BenchServingRecord | undefined>;
  write(concurrency: number, record: BenchServingRecord, round?: number): Promise<void>;
}

export interface LevelJob {
  concurrency: number;
  /** 0-based round of the level; 0 when left out. */
  round?: number;
  prompts: string[];
  /** Each prompt's category, when the dataset carries them (categories.ts). */
  categories?: readonly (string | undefined)[];
  signal?: AbortSignal;
  onProgress: (done: number, total: number) => void;
}

/** Measures one level; the sweep flushes nothing itself, each driver knows when to. */
export type MeasureLevel = (job: LevelJob) => Promise<BenchServingRecord>;

export interface SweepOptions {
  variant: Variant;
  concurrencies: readonly number[];
  /** Rounds per level (at least 1). */
  rounds: number;
  /** A round's prompts: the same (concurrency, round) gives the same prompts to both variants. */
  promptsFor: (concurrency: number, round: number) => string[];
  /** The categories of promptsFor's prompts, in the same order; absent when the dataset has none. */
  categoriesFor?: (concurrency: number, round: number) => readonly (string | undefined)[] | undefined;
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
    const rounds: BenchServingRecord[] = [];
    let stored = true;
    let sent = 0;
    for (let round = 0; round < Math.max(1, o.rounds); round++) {
      let record = await o.store.read(concurrency, round);
      if (!record) {
        stored = false;
        const prompts = o.promptsFor(concurrency, round);
        const total = prompts.length * Math.max(1, o.rounds);
        const before = sent;
        report({ level: i + 1, concurrency, done: before, total });
        record = await o.measure({
          concurrency,
          round,
          prompts,
          categories: o.categoriesFor?.(concurrency, round),
          signal: o.signal,
          onProgress: (done) => report({ level: i + 1, concurrency, done: before + done, total }),
        });
        await o.store.write(concurrency, record, round);
      }
      sent += record.completed + (record.errors ?? 0);
      rounds.push(record);
    }
    const record = aggregateRounds(rounds);
    records.push(record);
    finished.push({
      concurrency,
      outputThroughput: metricInterval(record, 'output_throughput')?.median ?? record.output_throughput,
      acceptLength: record.accept_length_pooled ?? record.mean_accept_length_per_request ?? record.accept_length,
      errors: record.errors ?? 0,
      stored,
    });
    report({ level: i + 1, concurrency, done: sent - (record.errors ?? 0), total: sent });
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
  /**
   * Or: the accept length of the measured requests alone, from counters read right before and
   * right after them (vLLM's cumulative spec-decode counters, engines/vllm/metrics.ts).
   */
  acceptWindow?: {
    open(signal?: AbortSignal): Promise<unknown>;
    close(opened: unknown, signal?: AbortSignal): Promise<number | undefined>;
  };
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
    let window: unknown;
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
      beforeMeasure: async () => {
        await flushWhenIdle(o.control, job.signal);
        if (o.acceptWindow) window = await o.acceptWindow.open(job.signal);
      },
    });
    // After the clock: the answers' retokenized counts, then the server's running accept length.
    const answers = await count(
      run.results.map((r) => r.generatedText ?? ''),
      false,
      job.signal,
    );
    let acceptLength: number | undefined;
    if (o.acceptWindow && window !== undefined) {
      acceptLength = await o.acceptWindow.close(window, job.signal).catch(() => undefined);
    } else if (o.acceptLengthFrom) {
      const info = await o.control.serverInfo(job.signal).catch(() => undefined);
      acceptLength = info ? o.acceptLengthFrom(info) : undefined;
    }
    return summarizeLevel(run, {
      ...o.meta,
      acceptLength,
      rules,
      promptLens: counts?.lens,
      outputLensRetokenized: answers.lens,
      categories: job.categories,
      simulated: simulatorOf(before),
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
  const path = (c: number, round: number): string => `${dir}/levels/${variant}-c${c}-r${round}-${key}.json`;
  return {
    async read(c, round = 0) {
      if (!(await host.stat(path(c, round)))) return undefined;
      try {
        return parseJsonLine((await host.readFile(path(c, round))).toString('utf8').trim()) as BenchServingRecord;
      } catch {
        return undefined; // a damaged file is measured again
      }
    },
    async write(c, record, round = 0) {
      await host.mkdirp(`${dir}/levels`);
      await host.writeFileAtomic(path(c, round), formatJsonLine(record) + '\n');
    },
  };
}
