/**
 * The generate stage: regenerate every assistant turn of the training conversations with
 * the target model, so the drafter learns the target's own distribution.
 *
 * Output layout under outDir:
 *   shards/<kind>-<seq>.jsonl   rows as they finish (kind ok|error|skipped|rejected), atomic,
 *                               each shard sorted by input line
 *   shards/index.jsonl          one line per shard written: {file, kind, seq, rows, bytes, sha256}
 *   shards/input.json           the input's sha256, so a resume never mixes two inputs
 *   train.jsonl                 ok rows, in input order (SpecForge conversations format)
 *   train_error.jsonl, train_skipped.jsonl, train_rejected.jsonl
 *   manifest.json               { input, inputSha256, generation, counts, files, shards }
 *   shards/pool/                a pool of servers' plan and batches (pool.ts); read here as done
 *                               rows when the stage goes on with one server
 *
 * Resume is by id (rejects by line number): rows already in a shard are never redone, so each
 * id appears exactly once across the outputs whatever was interrupted.
 *
 * Everything streams: the input is read a chunk at a time as the workers pull samples, rows
 * leave memory when their shard is written, and the outputs are a k-way merge of the shards.
 * What stays per sample is its key and line number (a few dozen bytes), for resume and order.
 *
 * This file runs the requests; beside it, job.ts holds the job's types and output names,
 * resume.ts reads what earlier attempts left, and combine.ts merges the shards into the outputs.
 */
import { writeFailure, runPoolAsync, StageAbortedError, streamLines } from '../common/index.js';
import { combine } from './combine.js';
import type { GenerateJob, GenerateSummary } from './job.js';
import { LinePlanner, rejectRow, type ConversationRow, type Status } from './plan.js';
import { regenerateSample, type Regenerate } from './sample.js';
import { entryKey, inputTotal, openShards, priorPoolBatches } from './resume.js';

export type { GenerateCounts, GenerateJob, GenerateManifest, GenerateProgress, GenerateSummary } from './job.js';

export async function runGenerate(job: GenerateJob): Promise<GenerateSummary> {
  try {
    return await generate(job);
  } catch (err) {
    // Writes that name their own path say so already; the rest (input.json, the manifest,
    // a directory) are reported against the output directory.
    throw await writeFailure(job.host, `${job.outDir}/`, null, err);
  }
}

async function generate(job: GenerateJob): Promise<GenerateSummary> {
  const { host } = job;
  if (!(job.concurrency >= 1)) throw new Error(`generate: concurrency must be at least 1 (got ${job.concurrency})`);
  const { sha256, total } = await inputTotal(job);
  const { shardDir, prior, writer } = await openShards(job, sha256, `${job.outDir}/shards`);
  const pool = await priorPoolBatches(host, job.outDir);
  /** Every key of this run's input and its line: what the merge orders by. */
  const planned = new Map<string, number>();
  const counts = { ok: 0, error: 0, skipped: 0, rejected: 0 };
  let resumed = 0;
  let finishedThisRun = 0;
  const started = Date.now();
  const report = (): void => {
    const secs = (Date.now() - started) / 1000;
    job.onProgress?.({
      done: resumed + finishedThisRun,
      total,
      ok: counts.ok,
      errors: counts.error,
      skipped: counts.skipped,
      rejected: counts.rejected,
      rate: secs > 0 ? finishedThisRun / secs : 0,
    });
  };
  const record = async (kind: Status, lineNo: number, row: unknown): Promise<void> => {
    writer.add(kind, row, lineNo);
    counts[kind]++;
    finishedThisRun++;
    report();
    await writer.room();
  };

  const planner = new LinePlanner();
  async function* toRegenerate(): AsyncGenerator<Regenerate> {
    for await (const line of streamLines(host, job.inputPath, {
      limit: job.numSamples,
      chunkBytes: job.inputChunkBytes,
    })) {
      const e = planner.plan(line);
      const key = entryKey(e);
      planned.set(key, e.lineNo);
      const before = prior.done.get(key) ?? pool.done.get(key);
      if (before) {
        counts[before]++;
        resumed++;
        continue;
      }
      if (e.action === 'reject') await record('rejected', e.lineNo, rejectRow(e));
      else if (e.action === 'skip') {
        await record('skipped', e.lineNo, {
          id: e.sample.id,
          conversations: e.sample.turns,
          status: 'skipped',
          error: e.reason,
        } satisfies ConversationRow);
      } else if (e.action === 'error') {
        await record('error', e.lineNo, {
          id: e.sample.id,
          conversations: e.sample.turns,
          status: 'error',
          error: e.error,
        } satisfies ConversationRow);
      } else yield e;
    }
  }

  const regenerate = (e: Regenerate, signal: AbortSignal) => regenerateSample(job, e, signal, record);

  report();
  try {
    await runPoolAsync(toRegenerate(), regenerate, { concurrency: job.concurrency, signal: job.signal });
  } catch (err) {
    await writer.close().catch(() => undefined);
    throw err;
  }
  await writer.close();
  if (job.signal?.aborted) {
    throw new StageAbortedError(
      'generate',
      `${resumed + finishedThisRun} of ${total} rows are saved in ${shardDir}; rerun to resume`,
    );
  }
  return combine(job, planned, total, sha256, resumed, pool.dirs);
}
