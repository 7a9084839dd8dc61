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
  /** Where they came from, for the report. */
  source: string;
}

/** bench_serving's dataset_name for the JSONL lines: conversation prompts are its "sharegpt". */
export function benchServingDatasetName(kind: DatasetKind): 'random' | 'sharegpt' {
  return kind === 'random' ? 'random' : 'sharegpt';
}

export function promptsPerLevel(concurrency: number, configured?: number): number {
  return configured ?? Math.max(16, 2 * concurrency);
}

/** The most prompts any level of the sweep needs. */
export function largestLevel(b: Config['stages']['benchmark']): number {
  return Math.max(...b.concurrencies.map((c) => promptsPerLevel(c, b['prompts-per-level'])));
}

export class DatasetError extends Error {
  override readonly name = 'DatasetError';
}

export async function loadPromptPool(host: Host, config: Config): Promise<PromptPool> {
  const b = config.stages.benchmark;
  const want = largestLevel(b);
  if (b.dataset === 'random')
    return { kind: 'random', prompts: [], source: `${b['input-len']} random words per prompt, seed ${b.seed}` };
  if (b.dataset === 'file') {
    const path = b['dataset-path']!;
    const prompts = await readFirstUserTurns(host, path, 0, want);
    if (prompts.length === 0)
      throw new DatasetError(`dataset-path ${path} holds no conversation with a non-empty first user turn`);
    return { kind: 'file', prompts, source: path };
  }
  const g = config.stages.generate;
  const skip = g['num-samples'];
  if (skip === undefined) {
    throw new DatasetError(
      'dataset: held-out needs stages.generate.num-samples: without it every row of stages.generate.input was used for training, so none is held out. Set num-samples below the number of input rows, or use dataset: random or file.',
    );
  }
  const prompts = await readFirstUserTurns(host, g.input, skip, want);
  if (prompts.length === 0) {
    throw new DatasetError(
      `dataset: held-out found no rows after the first ${skip} of ${g.input}: lower stages.generate.num-samples, or use dataset: random or file`,
    );
  }
  return { kind: 'held-out', prompts, source: `${g.input} after row ${skip}` };
}

/** The prompts of one level: n of them, the same for both variants. */
export function levelPrompts(pool: PromptPool, n: number, inputLenWords: number, seed: number): string[] {
  return pool.kind === 'random' ? randomPrompts(n, inputLenWords, seed) : cyclePrompts(pool.prompts, n);
}

const SLICE_BYTES = 4 * 1024 * 1024;

/**
 * First user turns of the rows of a conversations file, skipping the first `skipRows`
 * non-blank rows (the generate stage counts rows the same way), up to `want` prompts.
 * A `.json` file is a ShareGPT array and is read whole; anything else is JSONL.
 */
export async function readFirstUserTurns(host: Host, path: string, skipRows: number, want: number): Promise<string[]> {
  const st = await host.stat(path);
  if (!st || st.isDirectory) throw new DatasetError(`prompt file ${path} does not exist on host ${host.name}`);
  const out: string[] = [];
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
      const p = firstUserTurn(row);
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
      const p = firstUserTurn(row);
      if (p !== undefined) out.push(p);
      if (out.length >= want) return out;
    }
    if (atEnd) return out;
    offset = next;
  }
}
