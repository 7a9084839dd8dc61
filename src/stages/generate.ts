/**
 * The generate stage: regenerate every assistant turn of the training conversations with
 * the target model, so the drafter learns the target's own distribution.
 *
 * Output layout under outDir:
 *   shards/<kind>-<seq>.jsonl   rows as they finish (kind ok|error|skipped|rejected), atomic
 *   shards/input.json           the input's sha256, so a resume never mixes two inputs
 *   train.jsonl                 ok rows, in input order (SpecForge conversations format)
 *   train_error.jsonl, train_skipped.jsonl, train_rejected.jsonl
 *   manifest.json               { input, inputSha256, generation, counts, files }
 *
 * Resume is by id (rejects by line number): rows already in a shard are never redone, so each
 * id appears exactly once across the outputs whatever was interrupted.
 */
import type { Host } from '../hosts/host.js';
import type { Turn } from './conversations.js';
import { postJson, ServerUnreachableError, withRetries } from './generate-http.js';
import { planGenerate, regenerateTurns, rejectRow, type PlanEntry, type Status } from './generate-plan.js';
import { runPool, StageAbortedError } from './generate-pool.js';
import { readShards, sha256Hex, ShardWriter, splitJsonlLines, writeJsonlFile, type FileEntry } from './jsonl.js';

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

export async function runGenerate(job: GenerateJob): Promise<GenerateSummary> {
  const { host } = job;
  if (!(job.concurrency >= 1)) throw new Error(`generate: concurrency must be at least 1 (got ${job.concurrency})`);
  const shardSize = job.shardSize ?? 256;
  const flushMs = job.flushMs ?? 10_000;
  const shardDir = `${job.outDir}/shards`;

  const inputData = await host.readFile(job.inputPath);
  const inputSha = sha256Hex(inputData);
  let lines = splitJsonlLines(inputData);
  if (job.numSamples !== undefined) lines = lines.slice(0, job.numSamples);
  const plan = planGenerate(lines);
  const planned = new Map(plan.map((e) => [entryKey(e), e] as const));

  await host.mkdirp(shardDir);
  await checkSameInput(host, shardDir, job.inputPath, inputSha);
  const previous = await readShards(host, shardDir, KINDS);
  const done = new Set<string>();
  const counts = { ok: 0, error: 0, skipped: 0, rejected: 0 };
  for (const shard of previous.shards) {
    for (const row of shard.rows) {
      const key = rowKey(shard.kind, row);
      if (key === null || done.has(key) || !planned.has(key)) continue;
      done.add(key);
      counts[shard.kind as Status]++;
    }
  }
  const resumed = done.size;

  const writer = new ShardWriter(host, shardDir, { shardSize, flushMs, startSeq: previous.maxSeq });
  const started = Date.now();
  let finishedThisRun = 0;
  const record = (kind: Status, key: string, row: unknown): void => {
    writer.add(kind, row);
    done.add(key);
    counts[kind]++;
    finishedThisRun++;
    const secs = (Date.now() - started) / 1000;
    job.onProgress?.({
      done: done.size,
      total: plan.length,
      ok: counts.ok,
      errors: counts.error,
      skipped: counts.skipped,
      rejected: counts.rejected,
      rate: secs > 0 ? finishedThisRun / secs : 0,
    });
  };

  const todo: Extract<PlanEntry, { action: 'regenerate' }>[] = [];
  for (const e of plan) {
    const key = entryKey(e);
    if (done.has(key)) continue;
    if (e.action === 'reject') record('rejected', key, rejectRow(e));
    else if (e.action === 'skip') {
      record('skipped', key, { id: e.sample.id, conversations: e.sample.turns, status: 'skipped', reason: e.reason });
    } else if (e.action === 'error') {
      record('error', key, { id: e.sample.id, conversations: e.sample.turns, status: 'error', error: e.error });
    } else todo.push(e);
  }

  const regenerate = async (e: (typeof todo)[number], signal: AbortSignal): Promise<void> => {
    const key = entryKey(e);
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
      record('error', key, { id: e.sample.id, conversations: e.sample.turns, status: 'error', error });
      return;
    }
    record('ok', key, { id: e.sample.id, conversations: turns, status: 'ok' });
  };

  try {
    await runPool(todo, regenerate, { concurrency: job.concurrency, signal: job.signal });
  } catch (err) {
    await writer.close().catch(() => undefined);
    throw err;
  }
  await writer.close();
  if (job.signal?.aborted) {
    throw new StageAbortedError('generate', `${done.size} of ${plan.length} rows are saved in ${shardDir}; rerun to resume`);
  }

  return combine(job, plan, planned, inputSha, resumed);
}

/** Merge all shards into the four output files (input order) and check the accounting. */
async function combine(
  job: GenerateJob,
  plan: PlanEntry[],
  planned: Map<string, PlanEntry>,
  inputSha: string,
  resumed: number,
): Promise<GenerateSummary> {
  const { host } = job;
  const shardDir = `${job.outDir}/shards`;
  const { shards } = await readShards(host, shardDir, KINDS);
  const seen = new Set<string>();
  const byKind: Record<Status, { lineNo: number; row: Record<string, unknown> }[]> = {
    ok: [],
    error: [],
    skipped: [],
    rejected: [],
  };
  for (const shard of shards) {
    for (const row of shard.rows) {
      const key = rowKey(shard.kind, row);
      // Rows outside this plan (e.g. a smaller numSamples than a previous run) are not outputs.
      const entry = key === null ? undefined : planned.get(key);
      if (!entry || seen.has(key!)) continue;
      seen.add(key!);
      byKind[shard.kind as Status].push({ lineNo: entry.lineNo, row });
    }
  }
  const counts: GenerateCounts = {
    input: plan.length,
    ok: byKind.ok.length,
    error: byKind.error.length,
    skipped: byKind.skipped.length,
    rejected: byKind.rejected.length,
  };
  const accounted = counts.ok + counts.error + counts.skipped + counts.rejected;
  if (accounted !== counts.input) {
    const missing = plan.filter((e) => !seen.has(entryKey(e))).map((e) => e.lineNo);
    throw new Error(
      `generate incomplete: ok ${counts.ok} + error ${counts.error} + skipped ${counts.skipped} + rejected ` +
        `${counts.rejected} = ${accounted}, but the input has ${counts.input} lines; missing lines ` +
        `${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', …' : ''} (rerun to resume)`,
    );
  }
  const files: FileEntry[] = [];
  for (const kind of KINDS) {
    const rows = byKind[kind].sort((a, b) => a.lineNo - b.lineNo).map((r) => r.row);
    files.push(await writeJsonlFile(host, `${job.outDir}/${OUTPUT_NAMES[kind]}`, rows));
  }
  const manifest: GenerateManifest = {
    input: job.inputPath,
    inputSha256: inputSha,
    generation: { model: job.model, temperature: job.temperature, maxTokens: job.maxTokens },
    counts,
    files,
  };
  await host.writeFileAtomic(`${job.outDir}/manifest.json`, JSON.stringify(manifest, null, 2) + '\n');
  return { counts, manifest, resumed };
}
