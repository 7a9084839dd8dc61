/**
 * What earlier attempts of the generate stage left in shards/: the key of every row already
 * done (so a resume never redoes one), the input they were made from, and temp files to clear.
 */
import type { Host } from '../../hosts/host.js';
import {
  DiskFullError,
  digestLines,
  listShardFiles,
  ShardWriter,
  readShardIndex,
  sha256Hex,
  splitJsonlLines,
  tempOutputPath,
  type ShardIndexEntry,
} from '../common/index.js';
import { batchIndexOf, KINDS, OUTPUT_NAMES, poolDir, type GenerateJob } from './job.js';
import type { PlanEntry, Status } from './plan.js';

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
export function rowKeyOfText(kind: string, text: string): string | null {
  if (kind === 'rejected') {
    const m = LINE_PREFIX.exec(text);
    if (m) return `line:${m[1]}`;
  } else {
    const m = ID_PREFIX.exec(text);
    if (m) return `id:${JSON.parse(m[1]!) as string}`;
  }
  return rowKey(kind, JSON.parse(text) as Record<string, unknown>);
}

export function entryKey(e: PlanEntry): string {
  return e.action === 'reject' ? `line:${e.lineNo}` : `id:${e.sample.id}`;
}

export async function checkSameInput(host: Host, shardDir: string, input: string, sha: string): Promise<void> {
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
export async function scanShards(
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
export async function removeStaleTemps(host: Host, outDir: string, shardDir: string): Promise<void> {
  for (const f of await host.list(shardDir)) {
    const name = f.path.slice(f.path.lastIndexOf('/') + 1);
    if (!f.isDirectory && SHARD_TEMP.test(name)) await host.remove(f.path);
  }
  await host.remove(`${shardDir}/.merge`);
  for (const kind of KINDS) await host.remove(tempOutputPath(`${outDir}/${OUTPUT_NAMES[kind]}`));
}

/** The input's line count and sha256, and how many samples this job takes of it (num-samples). */
export async function inputTotal(job: GenerateJob): Promise<{ sha256: string; total: number }> {
  const digest = await digestLines(job.host, job.inputPath, job.inputChunkBytes);
  return {
    sha256: digest.sha256,
    total: job.numSamples === undefined ? digest.lines : Math.min(job.numSamples, digest.lines),
  };
}

/**
 * shards/ ready for this attempt, one server's or the pool plan's: `dir` (shards/ or a folder
 * under it) made, an interrupted attempt's temps cleared, the input checked against the one
 * the shards were made from, what is already done read back, and a writer that goes on after it.
 */
export async function openShards(job: GenerateJob, inputSha256: string, dir: string) {
  const { host } = job;
  const shardDir = `${job.outDir}/shards`;
  const indexPath = `${shardDir}/index.jsonl`;
  await host.mkdirp(dir);
  await removeStaleTemps(host, job.outDir, shardDir);
  await checkSameInput(host, shardDir, job.inputPath, inputSha256);
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
  return { shardDir, prior, writer };
}

/**
 * What a pool of servers finished before the stage went back to one server (servers removed
 * from the config mid-stage): each batch folder's done keys, so the one server goes on from
 * there instead of redoing them, and the folders, for the merge. Folders in batch order.
 */
export async function priorPoolBatches(
  host: Host,
  outDir: string,
): Promise<{ dirs: string[]; done: Map<string, Status> }> {
  const done = new Map<string, Status>();
  const root = poolDir(outDir);
  if (!(await host.stat(root))) return { dirs: [], done };
  const dirs = (await host.list(root))
    .filter((f) => f.isDirectory)
    .map((f) => ({ path: f.path, index: batchIndexOf(f.path.slice(f.path.lastIndexOf('/') + 1)) }))
    .filter((d): d is { path: string; index: number } => d.index !== null)
    .sort((a, b) => a.index - b.index)
    .map((d) => d.path);
  for (const dir of dirs) {
    await removeStaleTemps(host, dir, dir);
    for (const [key, kind] of (await scanShards(host, dir, `${dir}/index.jsonl`)).done)
      if (!done.has(key)) done.set(key, kind);
  }
  return { dirs, done };
}
