/**
 * The generate stage over a pool of target servers, in three steps the workflow runs:
 *   planPool     one pass over the input: rejects, skips and errors written as today, and the
 *                samples to regenerate cut into batches (byte ranges of the input), saved in
 *                shards/pool/plan.json on the host that trains
 *   runBatch     (pool-batch.ts) one batch against one server, into shards/pool/b-<n>/,
 *                resumable by sample id like the one-server stage
 *   combinePool  every shard, the plan's and the batches', merged into the same outputs the
 *                one-server stage writes, in input order
 * Which server takes which batch is the workflow's business: each takes the next as it frees
 * up, and a batch whose server died goes back to the front of the queue.
 */
import { HostLineReader, writeFailure, type LinePosition } from '../common/index.js';
import { combine } from './combine.js';
import { batchDir, poolDir, type GenerateJob, type GenerateSummary } from './job.js';
import { LinePlanner, rejectRow, type ConversationRow, type Status } from './plan.js';
import { entryKey, inputTotal, openShards } from './resume.js';

export interface PoolBatch {
  index: number;
  /** Where the batch's range of the input starts, and its line count before it. */
  from: LinePosition;
  /** Byte offset just past the batch's last sample. */
  end: number;
  samples: number;
  /**
   * Lines whose id came earlier in the input, noted while the batch was open: rejected by the
   * plan, never regenerated (the batch's own planner sees only its range). One past the last
   * sample lies outside the range and is harmless.
   */
  duplicates: number[];
  /**
   * Samples in the range that a one-server attempt of the stage had already finished (their
   * rows are in shards/): counted as resumed, not regenerated. Absent in plans from before.
   */
  done?: number[];
}

export interface PoolPlan {
  inputSha256: string;
  /** Non-blank input lines (after num-samples). */
  total: number;
  batchSize: number;
  batches: PoolBatch[];
}

/** What the workflow keeps of the plan: counts only, so a 100k-sample history stays small. */
export interface PoolPlanSummary {
  total: number;
  batches: number;
  batchSize: number;
  samples: number;
  /** Rows the plan recorded itself (rejects, skips, errors) and rows earlier attempts finished. */
  planned: number;
  resumed: number;
}

/** More batches than this would make the workflow's history the problem it is meant to avoid. */
const MAX_BATCHES = 5000;

export async function planPool(job: GenerateJob, batchSizeFor: (total: number) => number): Promise<PoolPlanSummary> {
  try {
    return await plan(job, batchSizeFor);
  } catch (err) {
    throw await writeFailure(job.host, `${job.outDir}/`, null, err);
  }
}

async function plan(job: GenerateJob, batchSizeFor: (total: number) => number): Promise<PoolPlanSummary> {
  const { host } = job;
  const { sha256, total } = await inputTotal(job);
  const batchSize = batchSizeFor(total);
  if (Math.ceil(total / batchSize) > MAX_BATCHES)
    throw new Error(
      `generate: ${total} samples in batches of ${batchSize} is over ${MAX_BATCHES} batches; raise stages.generate.batch-size to at least ${Math.ceil(total / MAX_BATCHES)}`,
    );
  const { prior, writer } = await openShards(job, sha256, poolDir(job.outDir));
  let planned = 0;
  let resumed = 0;
  const record = async (kind: Status, lineNo: number, row: unknown, key: string) => {
    if (prior.done.has(key)) return void resumed++;
    writer.add(kind, row, lineNo);
    planned++;
    await writer.room();
  };
  const batches: PoolBatch[] = [];
  let open: PoolBatch | undefined;
  const planner = new LinePlanner();
  const reader = new HostLineReader(host, job.inputPath, job.inputChunkBytes);
  let samples = 0;
  try {
    for (let n = 0; n < total; n++) {
      const at = reader.position();
      const line = await reader.next();
      if (line === null) break;
      const e = planner.plan(line);
      const key = entryKey(e);
      if (e.action === 'regenerate' && prior.done.has(key)) {
        resumed++;
        open?.done?.push(e.lineNo);
        continue;
      }
      if (e.action === 'regenerate') {
        open ??= { index: batches.length, from: at, end: at.offset, samples: 0, duplicates: [], done: [] };
        open.samples++;
        open.end = reader.position().offset;
        samples++;
        if (open.samples === batchSize) [batches[batches.length], open] = [open, undefined];
        continue;
      }
      if (e.action === 'reject' && e.reason === 'duplicate id' && open) open.duplicates.push(e.lineNo);
      if (e.action === 'reject') await record('rejected', e.lineNo, rejectRow(e), key);
      else {
        const kind = e.action === 'skip' ? 'skipped' : 'error';
        const row: ConversationRow = {
          id: e.sample.id,
          conversations: e.sample.turns,
          status: kind === 'skipped' ? 'skipped' : 'error',
          error: e.action === 'skip' ? e.reason : e.error,
        };
        await record(kind, e.lineNo, row, key);
      }
    }
  } catch (err) {
    await writer.close().catch(() => undefined);
    throw err;
  }
  if (open) batches.push(open);
  await writer.close();
  const poolPlan: PoolPlan = { inputSha256: sha256, total, batchSize, batches };
  await host.writeFileAtomic(`${poolDir(job.outDir)}/plan.json`, JSON.stringify(poolPlan) + '\n');
  return { total, batches: batches.length, batchSize, samples, planned, resumed };
}

export async function readPoolPlan(job: Pick<GenerateJob, 'host' | 'outDir'>): Promise<PoolPlan> {
  const path = `${poolDir(job.outDir)}/plan.json`;
  return JSON.parse((await job.host.readFile(path)).toString('utf8')) as PoolPlan;
}

/** The outputs from every shard, in input order, checked against the input like the one-server stage's. */
export async function combinePool(job: GenerateJob, resumed: number): Promise<GenerateSummary> {
  const poolPlan = await readPoolPlan(job);
  const planned = new Map<string, number>();
  const planner = new LinePlanner();
  const reader = new HostLineReader(job.host, job.inputPath, job.inputChunkBytes);
  for (let n = 0; n < poolPlan.total; n++) {
    const line = await reader.next();
    if (line === null) break;
    const e = planner.plan(line);
    planned.set(entryKey(e), e.lineNo);
  }
  const dirs = poolPlan.batches.map((b) => batchDir(job.outDir, b.index));
  try {
    return await combine(job, planned, poolPlan.total, poolPlan.inputSha256, resumed, dirs);
  } catch (err) {
    throw await writeFailure(job.host, `${job.outDir}/`, null, err);
  }
}
