// Where a benchmark's prompts come from. Every level of both variants draws from the
// same fixed pool, so the baseline and the drafter answer identical requests.
//
//   random    input-len random words per prompt, seeded (bench_serving's "random" idea,
//             tokenizer-free)
//   held-out  first user turns of the generate stage's input rows after the first
//             num-samples: prompts from the training distribution the drafter never saw
//   file      first user turns of a conversations file on the host
//
// Files are read through the Host in slices, so a multi-GB input is never loaded whole:
// only as many rows as the largest level needs.

import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import { cyclePrompts, firstUserTurn, randomPrompts } from './prompts.js';

export type DatasetKind = 'random' | 'held-out' | 'file';

export interface PromptPool {
  kind: DatasetKind;
  /** Distinct prompts (random: none; they are generated per level). */
  prompts: string[];
  /** Each prompt's `category` (by position in prompts) when any row carried one (categories.ts); absent otherwise. */
  categories?: (string | undefined)[];
  /** Where they came from, for the report. */
  source: string;
}

/** bench_serving's dataset_name for the JSONL lines: conversation prompts are its "sharegpt". */
export function benchServingDatasetName(kind: DatasetKind): 'random' | 'sharegpt' {
  return kind === 'random' ? 'random' : 'sharegpt';
}

/**
 * Requests per round of a level. The default, max(8, C), fills every slot once: with greedy,
 * fixed-length answers a closed loop runs in waves of C anyway, and R rounds of one wave cost
 * about what one round of max(16, 2 × C) did before rounds (rounds.ts DEFAULT_ROUNDS).
 */
export function promptsPerLevel(concurrency: number, configured?: number): number {
  return configured ?? Math.max(8, concurrency);
}

/** The most prompts any round of the sweep needs. */
export function largestLevel(b: Config['stages']['benchmark']): number {
  return Math.max(...b.concurrencies.map((c) => promptsPerLevel(c, b['prompts-per-level'])));
}

export class DatasetError extends Error {
  override readonly name = 'DatasetError';
}

/** With `rounds`, each round of the largest level gets prompts of its own while the file has enough. */
export async function loadPromptPool(host: Host, config: Config, rounds = 1): Promise<PromptPool> {
  const b = config.stages.benchmark;
  const want = largestLevel(b) * Math.max(1, rounds);
  if (b.dataset === 'random')
    return { kind: 'random', prompts: [], source: `${b['input-len']} random words per prompt, seed ${b.seed}` };
  if (b.dataset === 'file') {
    const path = b['dataset-path']!;
    const rows = await readPromptRows(host, path, 0, want);
    if (rows.length === 0)
      throw new DatasetError(`dataset-path ${path} holds no conversation with a non-empty first user turn`);
    return { kind: 'file', ...fromRows(rows), source: path };
  }
  const g = config.stages.generate;
  const skip = g['num-samples'];
  if (skip === undefined) {
    throw new DatasetError(
      'dataset: held-out needs stages.generate.num-samples: without it every row of stages.generate.input was used for training, so none is held out. Set num-samples below the number of input rows, or use dataset: random or file.',
    );
  }
  const rows = await readPromptRows(host, g.input, skip, want);
  if (rows.length === 0) {
    throw new DatasetError(
      `dataset: held-out found no rows after the first ${skip} of ${g.input}: lower stages.generate.num-samples, or use dataset: random or file`,
    );
  }
  return { kind: 'held-out', ...fromRows(rows), source: `${g.input} after row ${skip}` };
}

export interface PromptRow {
  prompt: string;
  /** The row's `category` (MT-bench's field name) when it is a non-empty string. */
  category?: string;
}

function fromRows(rows: readonly PromptRow[]): Pick<PromptPool, 'prompts' | 'categories'> {
  const prompts = rows.map((r) => r.prompt);
  return rows.some((r) => r.category !== undefined)
    ? { prompts, categories: rows.map((r) => r.category) }
    : { prompts };
}

/** Seeds differ per round so random prompts differ; round 0 keeps the level's seed as before rounds. */
const ROUND_SEED_STRIDE = 100_003;

/**
 * The prompts of one round of a level: n of them, the same for both variants. File prompts are
 * taken in order from position round × n (wrapping), so rounds see different rows while the
 * pool has them.
 */
export function levelPrompts(pool: PromptPool, n: number, inputLenWords: number, seed: number, round = 0): string[] {
  if (pool.kind === 'random') return randomPrompts(n, inputLenWords, seed + round * ROUND_SEED_STRIDE);
  return cyclePrompts(rotate(pool.prompts, round * n), n);
}

/** levelPrompts' categories, position for position; undefined when the pool has none. */
export function levelCategories(pool: PromptPool, n: number, round = 0): (string | undefined)[] | undefined {
  if (pool.kind === 'random' || !pool.categories) return undefined;
  return cyclePrompts(rotate(pool.categories, round * n) as string[], n);
}

function rotate<T>(xs: readonly T[], by: number): T[] {
  if (xs.length === 0) return [];
  const k = by % xs.length;
  return [...xs.slice(k), ...xs.slice(0, k)];
}

const SLICE_BYTES = 4 * 1024 * 1024;

/**
 * First user turns of the rows of a conversations file, skipping the first `skipRows`
 * non-blank rows (the generate stage counts rows the same way), up to `want` prompts.
 * A `.json` file is a ShareGPT array and is read whole; anything else is JSONL.
 */
export async function readFirstUserTurns(host: Host, path: string, skipRows: number, want: number): Promise<string[]> {
  return (await readPromptRows(host, path, skipRows, want)).map((r) => r.prompt);
}

function promptRow(row: unknown): PromptRow | undefined {
  const prompt = firstUserTurn(row);
  if (prompt === undefined) return undefined;
  const category = (row as { category?: unknown }).category;
  return typeof category === 'string' && category.trim().length > 0
    ? { prompt, category: category.trim() }
    : { prompt };
}

/** readFirstUserTurns with each row's category. */
export async function readPromptRows(host: Host, path: string, skipRows: number, want: number): Promise<PromptRow[]> {
  const st = await host.stat(path);
  if (!st || st.isDirectory) throw new DatasetError(`prompt file ${path} does not exist on host ${host.name}`);
  const out: PromptRow[] = [];
  if (path.endsWith('.json')) {
    let rows: unknown;
    try {
      rows = JSON.parse((await host.readFile(path)).toString('utf8'));
    } catch (err) {
      throw new DatasetError(`prompt file ${path} is not a JSON array: ${(err as Error).message}`);
    }
    if (!Array.isArray(rows)) throw new DatasetError(`prompt file ${path} is not a JSON array of conversations`);
    for (const row of rows.slice(skipRows)) {
      if (out.length >= want) break;
      const p = promptRow(row);
      if (p !== undefined) out.push(p);
    }
    return out;
  }
  let seen = 0;
  let offset = 0;
  let partial = '';
  for (;;) {
    const { data, offset: next } = await host.tailFrom(path, offset, SLICE_BYTES);
    const atEnd = data.length === 0 || next >= st.size;
    const lines = (partial + data).split('\n');
    partial = atEnd ? '' : lines.pop()!;
    for (const line of lines) {
      if (line.trim().length === 0) continue;
      if (seen++ < skipRows) continue;
      let row: unknown;
      try {
        row = JSON.parse(line);
      } catch {
        continue;
      }
      const p = promptRow(row);
      if (p !== undefined) out.push(p);
      if (out.length >= want) return out;
    }
    if (atEnd) return out;
    offset = next;
  }
}
