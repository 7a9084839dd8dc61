/**
 * The extract stage, patched-server driver: aerie's own capture (py/aerie_hs) in an SGLang
 * server, end to end on the host.
 *
 *   1. tokens    every sample's input_ids and loss_mask as SpecForge makes them (tokens.ts);
 *   2. prefill   each sample by its ids, rid = sample id; the capture writes `<id>.safetensors`
 *                into the run's dump folder (prefill.ts);
 *   3. convert   batches of dumps become `rows_<g>-<g+G>/data_<i>.ckpt` in SpecForge's offline
 *                layout, dumps deleted once their file is in place (convert.ts);
 *   4. check     the first samples, before the rest are prefilled, and a spread of samples
 *                before the stage counts as good (selfcheck.ts).
 *
 * Output under outDir: SpecForge's files, `index.jsonl` ({i, id, tokens}: the resume record
 * and the map from file to sample), `ids.jsonl`, `selfcheck/`, `extract_error.jsonl`
 * ({id?, line, error}) and `manifest.json`. Resume is by id: a sample counts as done when the
 * index names it and its file passes the structural check with its current token count.
 */
import type { Host } from '../../hosts/host.js';
import type { AeriePy } from '../common/index.js';
import { ConvertQueue, type Converted } from './convert.js';
import { BadDumpError, dumpPathFor, prefillOne, removeIfPresent, type TokenRow } from './prefill.js';
import {
  commitKept,
  describeVerdict,
  dropKept,
  keepForSelfCheck,
  runSelfCheck,
  type SelfCheckVerdict,
} from './selfcheck.js';
import { tokenizeSamples, type TokensSummary } from './tokens.js';
import { runStockBatch } from './stock-server.js';
import {
  checkSpace,
  finishedBefore,
  readRefs,
  selfCheckPicks,
  sweepForeign,
  type Done,
  type ExtractError,
  type Ref,
} from './samples.js';
import {
  ServerUnreachableError,
  withRetries,
  runPoolAsync,
  StageAbortedError,
  streamLines,
  writeJsonlFile,
  type FileEntry,
} from '../common/index.js';

import type { ExtractJob, ExtractProgress } from './server-job.js';

export interface ExtractCounts {
  input: number;
  ok: number;
  error: number;
  resumed: number;
}

export interface ExtractManifest {
  samples: string;
  hiddenSize: number;
  layout: string;
  tokens: { method: string; chatTemplate: string; maxLength: number };
  counts: ExtractCounts;
  totalTokens: number;
  totalBytes: number;
  selfCheck: { early: string | null; final: string };
  files: FileEntry[];
}

export interface ExtractSummary {
  counts: ExtractCounts;
  totalTokens: number;
  totalBytes: number;
  manifest: ExtractManifest;
  selfCheck: SelfCheckVerdict;
}

/** Every one of the first samples failed: the capture or the server is wrong, and retrying will not help. */
export class EarlySamplesFailedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EarlySamplesFailedError';
  }
}

export async function runExtract(job: ExtractJob): Promise<ExtractSummary> {
  const { host } = job;
  if (!(job.concurrency >= 1)) throw new Error(`extract: concurrency must be at least 1 (got ${job.concurrency})`);
  const started = Date.now();
  let progress: ExtractProgress = {
    phase: 'tokenizing',
    done: 0,
    total: 0,
    ok: 0,
    errors: 0,
    resumed: 0,
    bytes: 0,
    rate: 0,
  };
  const report = (p: Partial<ExtractProgress>): void => {
    progress = { ...progress, ...p };
    job.onProgress?.(progress);
  };
  report({});
  await host.mkdirp(job.outDir);
  const tokens: TokensSummary = await tokenizeSamples({
    host,
    py: job.py,
    samplesPath: job.samplesPath,
    outDir: job.outDir,
    modelPath: job.modelPath,
    chatTemplate: job.chatTemplate,
    maxLength: job.maxLength,
    crossCheck: job.crossCheck,
    trustRemoteCode: job.trustRemoteCode,
  });
  const { refs, errors: tokenErrors } = await readRefs(host, tokens.idsPath);
  const total = refs.length + tokenErrors.length;
  report({ phase: 'checking files', total, errors: tokenErrors.length, done: tokenErrors.length });

  const finished = await finishedBefore(job, refs);
  const resumed = finished.size;
  const todo = refs.filter((r) => !finished.has(r.id));
  await checkSpace(job, todo);
  // The run's dump folder is its own: whatever is there is an earlier attempt's leftover in RAM
  // (the stock producer's folder holds the aux pass's parts: the client sorts those out).
  await host.mkdirp(job.dumpDir);
  if (!job.stock) for (const f of await host.list(job.dumpDir)) if (!f.isDirectory) await removeIfPresent(host, f.path);

  const runErrors: ExtractError[] = [];
  const greedyOf = new Map<string, number>();
  const lineOf = new Map(todo.map((r) => [r.id, r.line]));
  let bytes = [...finished.values()].reduce((s, d) => s + d.bytes, 0);
  let thisRun = 0;
  const tally = (): void => {
    const secs = (Date.now() - started) / 1000;
    report({
      phase: 'extracting',
      done: tokenErrors.length + finished.size + runErrors.length,
      ok: finished.size,
      errors: tokenErrors.length + runErrors.length,
      resumed,
      bytes,
      rate: secs > 0 ? thisRun / secs : 0,
    });
  };
  tally();

  const converter = new ConvertQueue({
    host,
    py: job.py,
    dumpDir: job.dumpDir,
    outDir: job.outDir,
    fileGroupSize: job.fileGroupSize,
    hiddenSize: job.hiddenSize,
    batch: job.convertBatch,
    lingerMs: job.convertLingerMs,
    onResult: (row: TokenRow, r: Converted) => {
      thisRun++;
      const greedy = greedyOf.get(row.id);
      greedyOf.delete(row.id);
      if (r.ok) {
        finished.set(row.id, { i: r.i, tokens: r.tokens, bytes: Number.isFinite(r.bytes) ? r.bytes : 0 });
        bytes += Number.isFinite(r.bytes) ? r.bytes : 0;
        if (greedy !== undefined) keeping.push(commitKept(host, job.outDir, row, greedy));
      } else {
        runErrors.push({ id: row.id, line: lineOf.get(row.id) ?? 0, error: `convert: ${r.error}` });
        void removeIfPresent(host, dumpPathFor(job.dumpDir, row.id)).catch(() => undefined);
        if (greedy !== undefined) keeping.push(dropKept(host, job.outDir, row.id));
      }
      tally();
    },
  });
  const picks = selfCheckPicks(
    todo.map((r) => r.id),
    job.selfCheck.samples,
    job.selfCheck.finalSamples,
  );
  const ctx = {
    host,
    baseUrl: job.baseUrl,
    dumpDir: job.dumpDir,
    dumpWaitMs: job.dumpWaitMs ?? 60_000,
    requestTimeoutMs: job.requestTimeoutMs ?? 600_000,
  };
  const abandoned: string[] = [];
  // Self-check bookkeeping started from the converter's callback, awaited before each check.
  const keeping: Promise<void>[] = [];

  const extract = async (row: TokenRow, signal: AbortSignal): Promise<void> => {
    let got;
    try {
      got = await withRetries(() => prefillOne(ctx, row, signal), {
        retries: job.retries ?? 2,
        signal,
        backoffMs: 100,
      });
    } catch (err) {
      if (signal.aborted) return void abandoned.push(row.id);
      // The server is gone: every further sample would fail the same way.
      if (err instanceof ServerUnreachableError) throw err;
      const message = (err as Error)?.message ?? String(err);
      runErrors.push({
        id: row.id,
        line: lineOf.get(row.id) ?? 0,
        error: err instanceof BadDumpError ? `capture: ${message}` : message,
      });
      thisRun++;
      tally();
      return;
    }
    await landed(row, got.greedyNext);
  };
  /** A whole dump is in the folder: keep a copy if the self-check wants it, then queue its conversion. */
  const landed = async (row: TokenRow, greedyNext: number | undefined): Promise<void> => {
    if (picks.all.has(row.id) && greedyNext !== undefined) {
      await keepForSelfCheck(host, job.outDir, dumpPathFor(job.dumpDir, row.id), row.id);
      greedyOf.set(row.id, greedyNext);
    }
    // Bounds the dumps waiting in RAM; the slot goes back to the pool once the dump is queued.
    await converter.whenRoom();
    void converter.add(row).catch(() => undefined);
  };
  const extractBatch = async (batch: TokenRow[]): Promise<void> => {
    const stock = job.stock!;
    const { outcomes, greedy } = await runStockBatch({
      host,
      py: job.py,
      server: stock,
      pass: 'final',
      rows: batch,
      dumpDir: job.dumpDir,
      hiddenSize: job.hiddenSize,
      captureIds: stock.captureIds,
      scratchDir: job.outDir,
    });
    for (const row of batch) {
      const o = outcomes.get(row.id);
      if (o?.ok && o.dump) await landed(row, greedy.get(row.id));
      else {
        const error = !o
          ? 'the stock client printed no line for this sample'
          : o.ok
            ? 'final pass done but no aux part to merge with (the aux pass failed for it)'
            : o.error;
        runErrors.push({ id: row.id, line: lineOf.get(row.id) ?? 0, error: `stock: ${error}` });
        thisRun++;
        tally();
      }
    }
  };

  // Pass 2, streamed: the ids of the samples still to do, read as the workers pull them.
  async function* rows(want: Set<string>): AsyncGenerator<TokenRow> {
    for await (const { text } of streamLines(host, tokens.idsPath)) {
      const row = JSON.parse(text) as Partial<TokenRow> & { error?: string };
      if (typeof row.id === 'string' && want.has(row.id) && Array.isArray(row.input_ids)) {
        yield { id: row.id, input_ids: row.input_ids, loss_mask: row.loss_mask ?? [] };
      }
    }
  }
  async function* batches(from: AsyncGenerator<TokenRow>, size: number): AsyncGenerator<TokenRow[]> {
    let batch: TokenRow[] = [];
    for await (const row of from) {
      batch.push(row);
      if (batch.length >= size) yield batch.splice(0);
    }
    if (batch.length > 0) yield batch;
  }
  const stageSignal = job.signal;
  const pool = async (want: Set<string>): Promise<void> => {
    if (want.size === 0) return;
    try {
      const signal = stageSignal ? { signal: stageSignal } : {};
      if (job.stock)
        await runPoolAsync(batches(rows(want), job.stock.batch ?? 64), extractBatch, { concurrency: 1, ...signal });
      else await runPoolAsync(rows(want), extract, { concurrency: job.concurrency, ...signal });
    } finally {
      // Dumps already captured still land (and count) even when the stage stops early.
      await converter.drain().finally(async () => {
        for (const id of abandoned.splice(0))
          await removeIfPresent(host, dumpPathFor(job.dumpDir, id)).catch(() => undefined);
        await Promise.all(keeping.splice(0));
        await sweepForeign(host, job.dumpDir, lineOf);
      });
    }
  };

  // The first samples alone, checked before the stage commits to the rest.
  let early: SelfCheckVerdict | null = null;
  await pool(picks.early);
  if (stageSignal?.aborted) throw aborted(job, finished.size, total);
  if (picks.early.size > 0) {
    // A capture that fails every one of the first samples would fail the rest the same way.
    if (![...picks.early].some((id) => finished.has(id))) {
      const why = runErrors
        .filter((er) => er.id !== undefined && picks.early.has(er.id))
        .slice(0, 3)
        .map((er) => `${er.id}: ${er.error}`);
      throw new EarlySamplesFailedError(
        `all ${picks.early.size} first samples failed, so the extraction stops before the other ${todo.length - picks.early.size}: ${why.join('; ')}`,
      );
    }
    report({ phase: 'self-check' });
    early = await runSelfCheck({
      host,
      py: job.py,
      outDir: job.outDir,
      modelPath: job.modelPath,
      minAgreement: job.selfCheck.minAgreement,
      when: 'first samples',
    });
  }
  await pool(new Set(todo.map((r) => r.id).filter((id) => !picks.early.has(id))));
  if (stageSignal?.aborted) throw aborted(job, finished.size, total);
  report({ phase: 'self-check' });
  const final = await runSelfCheck({
    host,
    py: job.py,
    outDir: job.outDir,
    modelPath: job.modelPath,
    minAgreement: job.selfCheck.minAgreement,
    when: 'before the stage counts as good',
  });
  return finish(job, tokens, total, refs, finished, [...tokenErrors, ...runErrors], resumed, early, final);
}

function aborted(job: ExtractJob, ok: number, total: number): StageAbortedError {
  return new StageAbortedError('extract', `${ok} of ${total} samples are saved in ${job.outDir}; rerun to resume`);
}

async function finish(
  job: ExtractJob,
  tokens: TokensSummary,
  input: number,
  refs: Ref[],
  finished: Map<string, Done>,
  errors: ExtractError[],
  resumed: number,
  early: SelfCheckVerdict | null,
  final: SelfCheckVerdict,
): Promise<ExtractSummary> {
  const ok = refs.filter((r) => finished.has(r.id)).map((r) => ({ id: r.id, ...finished.get(r.id)! }));
  const counts: ExtractCounts = { input, ok: ok.length, error: errors.length, resumed };
  if (counts.ok + counts.error !== input) {
    throw new Error(
      `extract incomplete: ok ${counts.ok} + error ${counts.error} = ${counts.ok + counts.error}, but ` +
        `${job.samplesPath} has ${input} samples (rerun to resume)`,
    );
  }
  const files = [
    await writeJsonlFile(
      job.host,
      `${job.outDir}/extract_error.jsonl`,
      errors.slice().sort((a, b) => a.line - b.line),
    ),
  ];
  const manifest: ExtractManifest = {
    samples: job.samplesPath,
    hiddenSize: job.hiddenSize,
    layout: `specforge: rows_{g}-{g+${job.fileGroupSize}}/data_{i}.ckpt (input_ids, loss_mask int64 [T]; aux_hidden_state bf16 [1,T,3H]; hidden_state bf16 [1,T,H]); index.jsonl maps i to the sample id`,
    tokens: { method: tokens.method, chatTemplate: job.chatTemplate, maxLength: job.maxLength },
    counts,
    totalTokens: ok.reduce((s, e) => s + e.tokens, 0),
    totalBytes: ok.reduce((s, e) => s + e.bytes, 0),
    selfCheck: { early: early ? describeVerdict(early) : null, final: describeVerdict(final) },
    files,
  };
  await job.host.writeFileAtomic(`${job.outDir}/manifest.json`, JSON.stringify(manifest, null, 2) + '\n');
  return { counts, totalTokens: manifest.totalTokens, totalBytes: manifest.totalBytes, manifest, selfCheck: final };
}
