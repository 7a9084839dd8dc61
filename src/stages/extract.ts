/**
 * The extract stage, patched-server driver: prefill every regenerated sample on a server
 * started with SGLANG_HS_DUMP_DIR, verify each dump, and move it into the output tree.
 *
 * Output layout under outDir:
 *   rows_{k*2000}-{(k+1)*2000}/<id>.hs   the server's dump as written: prompt_tokens × 3 × hiddenSize bf16
 *   index-<seq>.jsonl                    finished samples as they finish (atomic batches): the resume record
 *   index.jsonl                          all finished samples, in sample order {id, index, file, tokens, bytes, textSha256}
 *   extract_error.jsonl                  samples that could not be extracted {id?, line, error}
 *   manifest.json                        { samples, hiddenSize, counts, totalTokens, totalBytes, files }
 *
 * Resume is by id: a finished id is skipped only if its file is still there with exactly the
 * recorded size and its text is unchanged; anything else is redone. Errors are redone too.
 */
import type { Host } from '../hosts/host.js';
import { BadDumpError, dumpOne, dumpPathFor, OutputWriteError, removeIfPresent, type Dumped } from './extract-dump.js';
import { DumpMover, sweepStagedMoves } from './extract-mover.js';
import {
  estimatedBytesPerToken,
  expectedDumpBytes,
  formatBytes,
  isIndexEntry,
  ExtractPlanner,
  type ExtractError,
  type ExtractItem,
  type ExtractRef,
  type IndexEntry,
} from './extract-plan.js';
import { ServerUnreachableError, withRetries } from './generate-http.js';
import { runPoolAsync, StageAbortedError } from './generate-pool.js';
import { digestLines, streamLines } from './host-lines.js';
import { readShards, sha256Hex, ShardWriter, writeJsonlFile, type FileEntry } from './jsonl.js';

export interface ExtractProgress {
  done: number;
  total: number;
  ok: number;
  errors: number;
  /** Finished in an earlier run and re-verified. */
  resumed: number;
  bytes: number;
  /** Samples finished per second in this run. */
  rate: number;
}

export interface ExtractJob {
  host: Host;
  baseUrl: string;
  samplesPath: string;
  dumpDir: string;
  outDir: string;
  hiddenSize: number;
  concurrency: number;
  /** Extra attempts per sample after a bad dump or a failed request (default 2). */
  retries?: number;
  /** How long to wait for a dump to reach its size after the answer (default 20 s). */
  dumpWaitMs?: number;
  requestTimeoutMs?: number;
  /** Index rows per batch file (default 256) and the longest they stay unwritten (default 10 s). */
  indexBatch?: number;
  flushMs?: number;
  /** Dumps moved per Host.moveFiles call (default 256) and the longest the first waits for the rest (default 1 s). */
  moveBatch?: number;
  moveLingerMs?: number;
  signal?: AbortSignal;
  onProgress?: (p: ExtractProgress) => void;
}

export interface ExtractCounts {
  input: number;
  ok: number;
  error: number;
  resumed: number;
}

export interface ExtractManifest {
  samples: string;
  samplesSha256: string;
  hiddenSize: number;
  layout: string;
  counts: ExtractCounts;
  totalTokens: number;
  totalBytes: number;
  files: FileEntry[];
}

export interface ExtractSummary {
  counts: ExtractCounts;
  totalTokens: number;
  totalBytes: number;
  manifest: ExtractManifest;
}

/** The destination cannot hold the extraction: retrying cannot help. */
export class InsufficientSpaceError extends Error {
  constructor(
    readonly neededBytes: number,
    readonly freeBytes: number,
    message: string,
  ) {
    super(message);
    this.name = 'InsufficientSpaceError';
  }
}

type Finished = IndexEntry & { textSha256: string };

/** Latest index entry per id from earlier runs' batch files. */
async function readIndex(host: Host, outDir: string): Promise<{ entries: Map<string, Finished>; maxSeq: number }> {
  const { shards, maxSeq } = await readShards(host, outDir, ['index']);
  const entries = new Map<string, Finished>();
  for (const s of shards) {
    for (const row of s.rows) {
      if (isIndexEntry(row) && typeof row.textSha256 === 'string') entries.set(row.id, row as unknown as Finished);
    }
  }
  return { entries, maxSeq };
}

/** Which earlier entries still hold: same file, same text, exact size on disk now. */
async function reverify(
  job: ExtractJob,
  items: ExtractRef[],
  entries: Map<string, Finished>,
): Promise<Map<string, Finished>> {
  const sizes = new Map<string, Map<string, number>>();
  const sizesIn = async (dir: string): Promise<Map<string, number>> => {
    let m = sizes.get(dir);
    if (m) return m;
    m = new Map();
    const st = await job.host.stat(`${job.outDir}/${dir}`);
    if (st?.isDirectory) {
      for (const f of await job.host.list(`${job.outDir}/${dir}`)) {
        if (!f.isDirectory) m.set(f.path.slice(f.path.lastIndexOf('/') + 1), f.size);
      }
    }
    sizes.set(dir, m);
    return m;
  };
  const good = new Map<string, Finished>();
  for (const item of items) {
    const e = entries.get(item.id);
    if (!e || e.file !== item.file || e.textSha256 !== item.textSha256) continue;
    if (e.bytes !== expectedDumpBytes(e.tokens, job.hiddenSize)) continue;
    const slash = item.file.lastIndexOf('/');
    const size = (await sizesIn(item.file.slice(0, slash))).get(item.file.slice(slash + 1));
    if (size === e.bytes) good.set(item.id, { ...e, index: item.index });
  }
  return good;
}

async function checkSpace(job: ExtractJob, todo: ExtractRef[]): Promise<void> {
  const tokens = todo.reduce((sum, it) => sum + it.estTokens, 0);
  const needed = tokens * estimatedBytesPerToken(job.hiddenSize);
  const free = await job.host.freeBytes(job.outDir);
  if (needed > free) {
    throw new InsufficientSpaceError(
      needed,
      free,
      `extract needs about ${formatBytes(needed)} (${needed} bytes: ${todo.length} samples, ~${tokens} tokens × 8 × ` +
        `hidden ${job.hiddenSize}) in ${job.outDir} on ${job.host.name}, but only ${formatBytes(free)} (${free} bytes) ` +
        `are free; free space or point the extraction at a larger disk`,
    );
  }
}

/**
 * Dumps of our samples left in the dump dir by an interrupted run: RAM we must give back.
 * Finished samples too: a run stopped early still lands every dump it had verified, so a
 * late or repeated dump can name a sample that is already done.
 */
async function clearStaleDumps(job: ExtractJob, items: ExtractRef[]): Promise<void> {
  const st = await job.host.stat(job.dumpDir);
  if (!st?.isDirectory) return;
  const ours = new Set(items.map((it) => `${it.id}.hs`));
  for (const f of await job.host.list(job.dumpDir)) {
    const name = f.path.slice(f.path.lastIndexOf('/') + 1);
    if (ours.has(name)) await removeIfPresent(job.host, dumpPathFor(job.dumpDir, name.slice(0, -3)));
  }
}

export async function runExtract(job: ExtractJob): Promise<ExtractSummary> {
  const { host } = job;
  if (!(job.concurrency >= 1)) throw new Error(`extract: concurrency must be at least 1 (got ${job.concurrency})`);
  if (!(job.hiddenSize >= 1)) throw new Error(`extract: hiddenSize must be at least 1 (got ${job.hiddenSize})`);
  // Pass 1, streamed: every sample's id, file and text hash (not its text) and the plan errors.
  const digest = await digestLines(host, job.samplesPath);
  const items: ExtractRef[] = [];
  const planErrors: ExtractError[] = [];
  {
    const planner = new ExtractPlanner();
    let index = 0;
    for await (const line of streamLines(host, job.samplesPath)) {
      const r = planner.plan(line, index++);
      if ('error' in r) planErrors.push(r.error);
      else {
        const { text, ...ref } = r.item;
        items.push({ ...ref, textSha256: sha256Hex(text) });
      }
    }
  }

  await host.mkdirp(job.outDir);
  const previous = await readIndex(host, job.outDir);
  const finished = await reverify(job, items, previous.entries);
  const todo = items.filter((it) => !finished.has(it.id));
  await sweepStagedMoves(host, job.outDir);
  await checkSpace(job, todo);
  await clearStaleDumps(job, items);

  const dirs = new Map<string, Promise<void>>();
  const ensureDir = (path: string): Promise<void> => {
    let p = dirs.get(path);
    if (!p) dirs.set(path, (p = host.mkdirp(path)));
    return p;
  };
  const ctx = {
    host,
    baseUrl: job.baseUrl,
    dumpDir: job.dumpDir,
    hiddenSize: job.hiddenSize,
    dumpWaitMs: job.dumpWaitMs ?? 20_000,
    requestTimeoutMs: job.requestTimeoutMs ?? 600_000,
  };
  const mover = new DumpMover(host, { maxBatch: job.moveBatch, lingerMs: job.moveLingerMs });
  const writer = new ShardWriter(host, job.outDir, {
    shardSize: job.indexBatch ?? 256,
    flushMs: job.flushMs ?? 10_000,
    startSeq: previous.maxSeq,
  });

  const runErrors: ExtractError[] = [];
  const total = planErrors.length + items.length;
  const resumed = finished.size;
  let bytes = [...finished.values()].reduce((s, e) => s + e.bytes, 0);
  let finishedThisRun = 0;
  const started = Date.now();
  const report = (): void => {
    const secs = (Date.now() - started) / 1000;
    job.onProgress?.({
      done: planErrors.length + finished.size + runErrors.length,
      total,
      ok: finished.size,
      errors: planErrors.length + runErrors.length,
      resumed,
      bytes,
      rate: secs > 0 ? finishedThisRun / secs : 0,
    });
  };
  report();

  // Prefills we stopped listening to: the server may still dump them.
  const abandoned: string[] = [];
  // A failed move means the output cannot take more (disk full, permissions): stop the pool.
  const stop = new AbortController();
  let moveError: unknown = null;
  const landing = new Set<Promise<void>>();
  const handOff = (item: ExtractItem, got: Dumped): void => {
    const p = mover
      .move({ from: got.path, to: `${job.outDir}/${item.file}`, bytes: got.bytes })
      .then(() => {
        // Only now, at its destination at the expected size, does the sample count as done.
        const entry: Finished = { id: item.id, index: item.index, file: item.file, tokens: got.tokens, bytes: got.bytes, textSha256: sha256Hex(item.text) };
        writer.add('index', entry);
        finished.set(item.id, entry);
        bytes += got.bytes;
        finishedThisRun++;
        report();
      })
      // Never rejects: a failure (of the move or of recording it) stops the stage through moveError.
      .catch(async (err: unknown) => {
        await removeIfPresent(host, got.path).catch(() => undefined);
        moveError ??= err;
        stop.abort(err);
      });
    landing.add(p);
    void p.finally(() => landing.delete(p));
  };
  const extract = async (item: ExtractItem, signal: AbortSignal): Promise<void> => {
    let got: Dumped | null = null;
    try {
      got = await withRetries(() => dumpOne(ctx, item, signal), { retries: job.retries ?? 2, signal, backoffMs: 100 });
    } catch (err) {
      if (signal.aborted) return void abandoned.push(item.id);
      // The server is gone: every further sample would fail the same way.
      if (err instanceof ServerUnreachableError) throw err;
      const message = (err as Error)?.message ?? String(err);
      runErrors.push({ id: item.id, line: item.lineNo, error: err instanceof BadDumpError ? `bad dump: ${message}` : message });
      finishedThisRun++;
      report();
      return;
    }
    const dst = `${job.outDir}/${item.file}`;
    try {
      await ensureDir(dst.slice(0, dst.lastIndexOf('/')));
      // Bounds the dumps waiting in RAM; the sample's slot goes back to the pool once it is queued.
      await mover.whenRoom();
    } catch (err) {
      await removeIfPresent(host, got.path).catch(() => undefined);
      throw new OutputWriteError(`cannot create the output directory for ${dst}: ${(err as Error)?.message ?? String(err)}`);
    }
    handOff(item, got);
  };

  // Pass 2, streamed: the texts of the samples still to do, read as the workers pull them.
  const wanted = new Set(todo.map((it) => it.index));
  async function* todoItems(): AsyncGenerator<ExtractItem> {
    const planner = new ExtractPlanner();
    let index = 0;
    for await (const line of streamLines(host, job.samplesPath)) {
      const r = planner.plan(line, index++);
      if ('item' in r && wanted.has(r.item.index)) yield r.item;
    }
  }
  let poolError: unknown = null;
  try {
    await runPoolAsync(todoItems(), extract, { concurrency: job.concurrency, signal: AbortSignal.any([stop.signal, ...(job.signal ? [job.signal] : [])]) });
  } catch (err) {
    poolError = err;
  } finally {
    // Dumps already verified still land (and count) even when the stage stops early.
    await mover.drain();
    await Promise.all([...landing]);
    // Take back what abandoned prefills dumped so far; the next run clears any later ones.
    for (const id of abandoned) await removeIfPresent(host, dumpPathFor(job.dumpDir, id)).catch(() => undefined);
  }
  const failure = poolError ?? moveError;
  if (failure !== null) {
    await writer.close().catch(() => undefined);
    throw failure;
  }
  await writer.close();
  if (job.signal?.aborted) {
    throw new StageAbortedError('extract', `${finished.size} of ${total} samples are saved in ${job.outDir}; rerun to resume`);
  }
  return finish(job, digest.sha256, total, items, finished, [...planErrors, ...runErrors], resumed);
}

async function finish(
  job: ExtractJob,
  samplesSha256: string,
  input: number,
  items: ExtractRef[],
  finished: Map<string, Finished>,
  errors: ExtractError[],
  resumed: number,
): Promise<ExtractSummary> {
  const ok = items.filter((it) => finished.has(it.id)).map((it) => finished.get(it.id)!);
  const counts: ExtractCounts = { input, ok: ok.length, error: errors.length, resumed };
  if (counts.ok + counts.error !== input) {
    throw new Error(
      `extract incomplete: ok ${counts.ok} + error ${counts.error} = ${counts.ok + counts.error}, but ` +
        `${job.samplesPath} has ${input} samples (rerun to resume)`,
    );
  }
  const totalTokens = ok.reduce((s, e) => s + e.tokens, 0);
  const totalBytes = ok.reduce((s, e) => s + e.bytes, 0);
  const files = [
    await writeJsonlFile(job.host, `${job.outDir}/index.jsonl`, ok),
    await writeJsonlFile(
      job.host,
      `${job.outDir}/extract_error.jsonl`,
      errors.slice().sort((a, b) => a.line - b.line),
    ),
  ];
  const manifest: ExtractManifest = {
    samples: job.samplesPath,
    samplesSha256,
    hiddenSize: job.hiddenSize,
    layout: 'rows_{k*2000}-{(k+1)*2000}/<id>.hs, k = sample index / 2000; prompt_tokens × 3 × hiddenSize bf16 each',
    counts,
    totalTokens,
    totalBytes,
    files,
  };
  await job.host.writeFileAtomic(`${job.outDir}/manifest.json`, JSON.stringify(manifest, null, 2) + '\n');
  return { counts, totalTokens, totalBytes, manifest };
}
