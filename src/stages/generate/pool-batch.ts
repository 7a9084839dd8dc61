/**
 * One batch of a generate pool against one server: the samples of the plan's byte range,
 * regenerated with the stage's concurrency into the batch's own shard directory. Resumable by
 * sample id, so a batch that goes back to the pool (its server died, its worker was lost)
 * redoes only the samples that were in flight.
 */
import {
  HostLineReader,
  runPoolAsync,
  ShardWriter,
  StageAbortedError,
  writeFailure,
  type LinePosition,
} from '../common/index.js';
import { batchDir, type GenerateJob } from './job.js';
import { LinePlanner, type Status } from './plan.js';
import { readPoolPlan, type PoolBatch } from './pool.js';
import { entryKey, removeStaleTemps, scanShards } from './resume.js';
import { regenerateSample, type Regenerate } from './sample.js';

export interface BatchOutcome {
  index: number;
  samples: number;
  counts: Record<'ok' | 'error' | 'skipped', number>;
  /** Samples an earlier attempt of this batch had finished. */
  resumed: number;
}

export async function runBatch(job: GenerateJob, index: number): Promise<BatchOutcome> {
  const dir = batchDir(job.outDir, index);
  try {
    return await batch(job, index, dir);
  } catch (err) {
    throw await writeFailure(job.host, `${dir}/`, null, err);
  }
}

async function batch(job: GenerateJob, index: number, dir: string): Promise<BatchOutcome> {
  const { host } = job;
  const plan = await readPoolPlan(job);
  const b: PoolBatch | undefined = plan.batches[index];
  if (!b) throw new Error(`generate: the pool plan has no batch ${index} (it has ${plan.batches.length})`);
  await host.mkdirp(dir);
  await removeStaleTemps(host, dir, dir);
  const prior = await scanShards(host, dir, `${dir}/index.jsonl`);
  const writer = new ShardWriter(host, dir, {
    shardSize: job.shardSize ?? 256,
    flushMs: job.flushMs ?? 10_000,
    startSeq: prior.maxSeq,
    indexPath: `${dir}/index.jsonl`,
  });
  const counts = { ok: 0, error: 0, skipped: 0 };
  let resumed = 0;
  const started = Date.now();
  const report = () => {
    const done = resumed + counts.ok + counts.error + counts.skipped;
    const secs = (Date.now() - started) / 1000;
    job.onProgress?.({
      done,
      total: b.samples,
      ok: counts.ok,
      errors: counts.error,
      skipped: counts.skipped,
      rejected: 0,
      rate: secs > 0 ? (done - resumed) / secs : 0,
    });
  };
  const record = async (kind: Status, lineNo: number, row: unknown) => {
    writer.add(kind, row, lineNo);
    if (kind !== 'rejected') counts[kind]++;
    report();
    await writer.room();
  };
  // Not this batch's to regenerate: later copies of an id, and samples a one-server attempt finished.
  const skip = new Set([...b.duplicates, ...(b.done ?? [])]);
  async function* samples(): AsyncGenerator<Regenerate> {
    const planner = new LinePlanner();
    const reader = new HostLineReader(host, job.inputPath, job.inputChunkBytes, b!.from as LinePosition);
    while (reader.position().offset < b!.end) {
      const line = await reader.next();
      if (line === null) return;
      const e = planner.plan(line);
      if (e.action !== 'regenerate' || skip.has(e.lineNo)) continue;
      if (prior.done.has(entryKey(e))) {
        resumed++;
        continue;
      }
      yield e;
    }
  }
  report();
  try {
    await runPoolAsync(samples(), (e, signal) => regenerateSample(job, e, signal, record), {
      concurrency: job.concurrency,
      signal: job.signal,
    });
  } catch (err) {
    await writer.close().catch(() => undefined);
    throw err;
  }
  await writer.close();
  const done = resumed + counts.ok + counts.error + counts.skipped;
  if (job.signal?.aborted)
    throw new StageAbortedError('generate', `batch ${index}: ${done} of ${b.samples} samples are saved in ${dir}`);
  if (done !== b.samples)
    throw new Error(
      `generate batch ${index}: ${done} samples finished, but the plan has ${b.samples} in its range; the input changed under the run?`,
    );
  return { index, samples: b.samples, counts, resumed };
}
