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
 *
 * Resume is by id (rejects by line number): rows already in a shard are never redone, so each
 * id appears exactly once across the outputs whatever was interrupted.
 *
 * Everything streams: the input is read a chunk at a time as the workers pull samples, rows
 * leave memory when their shard is written, and the outputs are a k-way merge of the shards.
 * What stays per sample is its key and line number (a few dozen bytes), for resume and order.
 */
import type { Host } from '../../hosts/host.js';
import type { Turn } from '../common/index.js';
import {
  DiskFullError,
  writeFailure,
  postJson,
  ServerUnreachableError,
  withRetries,
  runPoolAsync,
  StageAbortedError,
  digestLines,
  streamLines,
  JsonlAppender,
  tempOutputPath,
  listShardFiles,
  readShardIndex,
  sha256Hex,
  ShardWriter,
  splitJsonlLines,
  type FileEntry,
  type ShardIndexEntry,
} from '../common/index.js';
import { mergeShards } from './merge.js';
import {
  LinePlanner,
  regenerateTurns,
  rejectRow,
  specforgeRowText,
  type ConversationRow,
  type PlanEntry,
  type Status,
} from './plan.js';

export interface GenerateProgress {
  done: number;
  total: number;
  ok: number;
  errors: number;
  skipped: number;
  rejected: number;
  /** Samples finished per second in this run. */
  rate: number;
}

export interface GenerateJob {
  host: Host;
  baseUrl: string;
  model: string;
  inputPath: string;
  outDir: string;
  temperature: number;
  maxTokens: number;
  concurrency: number;
  /** Only the first numSamples non-blank input lines are the stage's input. */
  numSamples?: number;
  /** Extra attempts per request after the first. */
  retries: number;
  shardSize?: number;
  flushMs?: number;
  /** Bytes per read of the input through the host (default 4 MiB). */
  inputChunkBytes?: number;
  /** Per-request budget (default 10 minutes); a timeout is the sample's error. */
  requestTimeoutMs?: number;
  signal?: AbortSignal;
  onProgress?: (p: GenerateProgress) => void;
}

export interface GenerateCounts {
  input: number;
  ok: number;
  error: number;
  skipped: number;
  rejected: number;
}

export interface GenerateManifest {
  input: string;
  inputSha256: string;
  generation: { model: string; temperature: number; maxTokens: number };
  counts: GenerateCounts;
  files: FileEntry[];
  shards: { dir: string; files: number; index: string };
}

export interface GenerateSummary {
  counts: GenerateCounts;
  manifest: GenerateManifest;
  /** Rows found already done in shards at start (resume), all kinds. */
  resumed: number;
}

const KINDS: readonly Status[] = ['ok', 'error', 'skipped', 'rejected'];
const OUTPUT_NAMES: Record<Status, string> = {
  ok: 'train.jsonl',
  error: 'train_error.jsonl',
  skipped: 'train_skipped.jsonl',
  rejected: 'train_rejected.jsonl',
};

/** Key of a row across runs: its id, or its line number for rejects (which may have no id). */
function rowKey(kind: string, row: Record<string, unknown>): string | null {
  if (kind === 'rejected') return typeof row.line === 'number' ? `line:${row.line}` : null;
  return typeof row.id === 'string' ? `id:${row.id}` : null;
}

const ID_PREFIX = /^\{"id":("(?:[^"\\]|\\.)*")[,}]/;
const LINE_PREFIX = /^\{"line":(\d+)[,}]/;

/**
 * rowKey from a row's JSON text. Rows aerie writes start with their key ({"id": or {"line":),
 * so the key is read from the prefix without parsing the conversation; anything else is parsed.
 */
function rowKeyOfText(kind: string, text: string): string | null {
  if (kind === 'rejected') {
    const m = LINE_PREFIX.exec(text);
    if (m) return `line:${m[1]}`;
  } else {
    const m = ID_PREFIX.exec(text);
    if (m) return `id:${JSON.parse(m[1]!) as string}`;
  }
  return rowKey(kind, JSON.parse(text) as Record<string, unknown>);
}

function entryKey(e: PlanEntry): string {
  return e.action === 'reject' ? `line:${e.lineNo}` : `id:${e.sample.id}`;
}

async function checkSameInput(host: Host, shardDir: string, input: string, sha: string): Promise<void> {
  const path = `${shardDir}/input.json`;
  if (await host.stat(path)) {
    const prev = JSON.parse((await host.readFile(path)).toString('utf8')) as { sha256?: string; input?: string };
    if (prev.sha256 !== sha) {
      throw new Error(
        `generate: ${input} changed since the partial run in ${shardDir} (sha256 ${prev.sha256} then, ${sha} now); ` +
          `resuming would mix two inputs. Restore the input, or remove ${shardDir} to start over.`,
      );
    }
    return;
  }
  await host.writeFileAtomic(path, JSON.stringify({ input, sha256: sha }) + '\n');
}

/**
 * What earlier runs finished: each key's kind, from the shards on disk, each shard checked
 * against the index line written with it. A shard that differs from what aerie wrote was
 * changed from outside: stop and say so rather than trust or silently redo it.
 */
async function scanShards(
  host: Host,
  shardDir: string,
  indexPath: string,
): Promise<{ done: Map<string, Status>; maxSeq: number; files: number; largest: number }> {
  const { shards, maxSeq } = await listShardFiles(host, shardDir, KINDS);
  await terminateIndex(host, indexPath);
  const index = await readShardIndex(host, indexPath);
  const done = new Map<string, Status>();
  for (const shard of shards) {
    const data = await host.readFile(shard.path);
    const sha = sha256Hex(data);
    const entry = index.get(shard.name);
    if (entry && (entry.sha256 !== sha || entry.bytes !== data.length)) {
      throw new Error(
        `shard ${shard.path} is not what aerie wrote (${data.length} bytes, sha256 ${sha}; index says ${entry.bytes} bytes, ${entry.sha256}); ` +
          `remove it to redo its rows`,
      );
    }
    const rows = splitJsonlLines(data);
    if (!entry) {
      // Renamed into place but the index append was lost to a crash: the rename was atomic, so the shard is whole.
      const e: ShardIndexEntry = {
        file: shard.name,
        kind: shard.kind,
        seq: shard.seq,
        rows: rows.length,
        bytes: data.length,
        sha256: sha,
      };
      await host.appendFile(indexPath, JSON.stringify(e) + '\n');
    }
    for (const { lineNo, text } of rows) {
      let key: string | null;
      try {
        // A shard the index vouches for is what aerie wrote; any other is parsed in full.
        key = entry ? rowKeyOfText(shard.kind, text) : rowKey(shard.kind, JSON.parse(text) as Record<string, unknown>);
      } catch {
        throw new Error(`corrupt shard ${shard.path} line ${lineNo}: not JSON; remove the file to redo its rows`);
      }
      if (key !== null && !done.has(key)) done.set(key, shard.kind as Status);
    }
  }
  return { done, maxSeq, files: shards.length, largest: Math.max(0, ...shards.map((x) => x.bytes)) };
}

/**
 * An index append cut short (a full disk writes part of the line) would swallow the next
 * line appended after it; ending it here keeps every later line readable. The cut line
 * itself is skipped by readShardIndex and its shard re-vouched from its content.
 */
async function terminateIndex(host: Host, indexPath: string): Promise<void> {
  const st = await host.stat(indexPath);
  if (!st || st.size === 0) return;
  const { data } = await host.tailFrom(indexPath, st.size - 1);
  if (data !== '\n') await host.appendFile(indexPath, '\n');
}

const SHARD_TEMP = /^\.(?:ok|error|skipped|rejected)-\d+\.jsonl\..+\.tmp$/;

/**
 * Temp files an interrupted attempt left (a shard being written when the worker died, a
 * merge cut short) are never read as data, but they hold space: on a full disk they are
 * what a retry most needs back. One attempt runs at a time, so none of them is in use.
 */
async function removeStaleTemps(host: Host, outDir: string, shardDir: string): Promise<void> {
  for (const f of await host.list(shardDir)) {
    const name = f.path.slice(f.path.lastIndexOf('/') + 1);
    if (!f.isDirectory && SHARD_TEMP.test(name)) await host.remove(f.path);
  }
  await host.remove(`${shardDir}/.merge`);
  for (const kind of KINDS) await host.remove(tempOutputPath(`${outDir}/${OUTPUT_NAMES[kind]}`));
}

async function chatAnswer(job: GenerateJob, conversation: Turn[], signal: AbortSignal): Promise<Turn> {
  const body = {
    model: job.model,
    messages: conversation.map((t) => ({ role: t.role, content: t.content })),
    temperature: job.temperature,
    max_tokens: job.maxTokens,
    stream: false,
  };
  const res = (await postJson(`${job.baseUrl}/v1/chat/completions`, body, {
    signal,
    timeoutMs: job.requestTimeoutMs ?? 600_000,
  })) as { choices?: { message?: { content?: string | null; reasoning_content?: string | null } }[] };
  const msg = res?.choices?.[0]?.message;
  if (!msg) throw new Error('answer has no choices[0].message');
  const turn: Turn = { role: 'assistant', content: typeof msg.content === 'string' ? msg.content : '' };
  if (typeof msg.reasoning_content === 'string' && msg.reasoning_content !== '') {
    turn.reasoning_content = msg.reasoning_content;
  }
  return turn;
}

type Regenerate = Extract<PlanEntry, { action: 'regenerate' }>;

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
  const shardDir = `${job.outDir}/shards`;
  const indexPath = `${shardDir}/index.jsonl`;

  const digest = await digestLines(host, job.inputPath, job.inputChunkBytes);
  const total = job.numSamples === undefined ? digest.lines : Math.min(job.numSamples, digest.lines);
  await host.mkdirp(shardDir);
  await removeStaleTemps(host, job.outDir, shardDir);
  await checkSameInput(host, shardDir, job.inputPath, digest.sha256);
  const prior = await scanShards(host, shardDir, indexPath);
  // A retry after a full disk that cannot write even a shard like the ones before would only
  // spend the target's time on answers it must throw away: fail before the first request.
  const free = await host.freeBytes(shardDir);
  if (prior.largest > 0 && free < prior.largest)
    throw new DiskFullError(host.name, `${shardDir}/`, prior.largest, free);

  const writer = new ShardWriter(host, shardDir, {
    shardSize: job.shardSize ?? 256,
    flushMs: job.flushMs ?? 10_000,
    startSeq: prior.maxSeq,
    indexPath,
  });
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
      const before = prior.done.get(key);
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

  const regenerate = async (e: Regenerate, signal: AbortSignal): Promise<void> => {
    let turns: Turn[];
    try {
      turns = await regenerateTurns(e.sample.turns, (soFar) =>
        withRetries(() => chatAnswer(job, soFar, signal), { retries: job.retries, signal }),
      );
    } catch (err) {
      // An aborted sample is not recorded: the resume redoes it.
      if (signal.aborted) return;
      // A server nobody can reach is not this sample's fault: stop, record nothing, resume later.
      if (err instanceof ServerUnreachableError) throw err;
      const error = (err as Error)?.message ?? String(err);
      await record('error', e.lineNo, {
        id: e.sample.id,
        conversations: e.sample.turns,
        status: 'error',
        error,
      } satisfies ConversationRow);
      return;
    }
    // An empty answer fails SpecForge's validator (SpecForge@a6b6b023:scripts/conversation_validation.py:30-36),
    // so it is skipped, as SpecForge's own regenerator does under --reasoning disable (regenerate_train_data.py:287-296).
    const empty = turns.findIndex((t) => t.role === 'assistant' && t.content.trim() === '');
    if (empty >= 0) {
      await record('skipped', e.lineNo, {
        id: e.sample.id,
        conversations: e.sample.turns,
        status: 'skipped',
        error: `the target's answer at turn ${empty + 1} is empty`,
      } satisfies ConversationRow);
      return;
    }
    await record('ok', e.lineNo, {
      id: e.sample.id,
      conversations: turns,
      status: 'success',
    } satisfies ConversationRow);
  };

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
  return combine(job, planned, total, digest.sha256, resumed);
}

/** Merge all shards into the four output files (input order) and check the accounting. */
async function combine(
  job: GenerateJob,
  planned: Map<string, number>,
  input: number,
  inputSha: string,
  resumed: number,
): Promise<GenerateSummary> {
  const { host } = job;
  const shardDir = `${job.outDir}/shards`;
  const { shards } = await listShardFiles(host, shardDir, KINDS);
  const taken = new Set<number>();
  const outputs = new Map<Status, JsonlAppender>();
  const written: Record<Status, number> = { ok: 0, error: 0, skipped: 0, rejected: 0 };
  try {
    for (const kind of KINDS) {
      const out = new JsonlAppender(host, `${job.outDir}/${OUTPUT_NAMES[kind]}`);
      outputs.set(kind, out);
      const sources = shards.filter((s) => s.kind === kind).map((s) => ({ path: s.path, order: s.seq }));
      // Rows outside this input (e.g. a smaller numSamples than a previous run) are not outputs.
      const lineOf = (text: string): number | null => {
        const key = rowKeyOfText(kind, text);
        return key === null ? null : (planned.get(key) ?? null);
      };
      const rewrite = kind === 'rejected' ? undefined : specforgeRowText;
      written[kind] = await mergeShards(host, sources, lineOf, taken, out, `${shardDir}/.merge`, rewrite);
    }
  } catch (err) {
    for (const o of outputs.values()) await o.discard();
    throw err;
  }
  const counts: GenerateCounts = { input, ...written };
  const accounted = counts.ok + counts.error + counts.skipped + counts.rejected;
  if (accounted !== counts.input || planned.size !== counts.input) {
    for (const o of outputs.values()) await o.discard();
    const missing: number[] = [];
    for (const lineNo of planned.values()) if (!taken.has(lineNo) && missing.length < 11) missing.push(lineNo);
    throw new Error(
      `generate incomplete: ok ${counts.ok} + error ${counts.error} + skipped ${counts.skipped} + rejected ` +
        `${counts.rejected} = ${accounted}, but the input has ${counts.input} lines; missing lines ` +
        `${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', …' : ''} (rerun to resume)`,
    );
  }
  const files: FileEntry[] = [];
  try {
    for (const kind of KINDS) files.push(await outputs.get(kind)!.commit());
  } catch (err) {
    // Committed outputs stay (a retry rewrites them from the shards); the rest hold space.
    for (const o of outputs.values()) await o.discard();
    throw err;
  }
  const manifest: GenerateManifest = {
    input: job.inputPath,
    inputSha256: inputSha,
    generation: { model: job.model, temperature: job.temperature, maxTokens: job.maxTokens },
    counts,
    files,
    shards: { dir: shardDir, files: shards.length, index: `${shardDir}/index.jsonl` },
  };
  await host.writeFileAtomic(`${job.outDir}/manifest.json`, JSON.stringify(manifest, null, 2) + '\n');
  return { counts, manifest, resumed };
}
