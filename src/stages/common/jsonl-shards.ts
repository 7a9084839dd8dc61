/**
 * jsonl helpers shared by the data stages: line splitting with 1-based line numbers,
 * rendering, hashing, and sharded atomic output through a Host.
 *
 * Shards are how a stage survives a crash: rows are buffered and written as whole files
 * (`<dir>/<kind>-<seq>.jsonl`, temp + fsync + rename via the Host), so a reader never sees
 * a partial row, and a crash loses at most the rows still in the buffer.
 */
import { createHash } from 'node:crypto';
import type { Host } from '../../hosts/host.js';
import { DiskFullError, writeFailure } from './disk-full.js';

export interface NumberedLine {
  /** 1-based line number in the file. */
  lineNo: number;
  text: string;
}

/**
 * Non-blank lines with their 1-based line numbers (blank lines are not inputs). A Buffer is
 * split by bytes and decoded line by line, so inputs past V8's ~512 MiB string limit work.
 */
export function splitJsonlLines(data: Buffer | string): NumberedLine[] {
  const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const out: NumberedLine[] = [];
  let start = 0;
  let lineNo = 0;
  while (start <= buf.length) {
    let end = buf.indexOf(0x0a, start);
    if (end === -1) end = buf.length;
    lineNo++;
    let line = buf.toString('utf8', start, end);
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line.trim() !== '') out.push({ lineNo, text: line });
    start = end + 1;
  }
  return out;
}

/** jsonl as bytes, built row by row (a large output can exceed V8's string limit as one string). */
export function toJsonl(rows: readonly unknown[]): Buffer {
  return Buffer.concat(rows.map((r) => Buffer.from(JSON.stringify(r) + '\n', 'utf8')));
}

export function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

export interface FileEntry {
  path: string;
  bytes: number;
  sha256: string;
  rows: number;
}

/** Write rows as jsonl atomically and describe the file for a manifest. */
export async function writeJsonlFile(host: Host, path: string, rows: readonly unknown[]): Promise<FileEntry> {
  const data = toJsonl(rows);
  await host.writeFileAtomic(path, data);
  return { path, bytes: data.length, sha256: sha256Hex(data), rows: rows.length };
}

function joinPath(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

const SHARD_NAME = /^([a-z]+)-(\d+)\.jsonl$/;

export function shardFileName(kind: string, seq: number): string {
  return `${kind}-${String(seq).padStart(6, '0')}.jsonl`;
}

export interface ShardWriterOptions {
  /** Flush once this many rows are buffered (all kinds together). */
  shardSize: number;
  /** Flush whatever is buffered at least this often. */
  flushMs: number;
  /** Last sequence number already used in dir. */
  startSeq: number;
  /**
   * Append one line per written shard here ({file, kind, seq, rows, bytes, sha256}) after its
   * rename, so a resume can tell a shard it wrote from one damaged later.
   */
  indexPath?: string;
  /** add() callers wait (room()) while more than this many flushes are queued. */
  maxPendingFlushes?: number;
}

/** One line of a shard index: what aerie wrote, to check what is on disk against. */
export interface ShardIndexEntry {
  file: string;
  kind: string;
  seq: number;
  rows: number;
  bytes: number;
  sha256: string;
}

/**
 * Buffers rows per kind and writes them as numbered shard files, one flush at a time. Rows
 * given a sort key are written in key order within their shard, so every shard is a sorted
 * run that a merge can stream.
 */
export class ShardWriter {
  private buffers = new Map<string, { key: number; json: string }[]>();
  private buffered = 0;
  private seq: number;
  private chain: Promise<void> = Promise.resolve();
  private pending = 0;
  private failure: Error | null = null;
  private timer: NodeJS.Timeout | null = null;
  private waiters: (() => void)[] = [];
  readonly written: { kind: string; seq: number; path: string; rows: number }[] = [];

  constructor(
    private readonly host: Host,
    private readonly dir: string,
    private readonly opts: ShardWriterOptions,
  ) {
    this.seq = opts.startSeq;
    this.timer = setInterval(() => void this.flush().catch(() => undefined), opts.flushMs);
    this.timer.unref();
  }

  /** Buffer one row; triggers a flush when the buffer reaches shardSize. Throws a past flush failure. */
  add(kind: string, row: unknown, sortKey = 0): void {
    if (this.failure) throw this.failure;
    let buf = this.buffers.get(kind);
    if (!buf) this.buffers.set(kind, (buf = []));
    // Serialised now, so the row's object graph dies young instead of waiting in the buffer.
    buf.push({ key: sortKey, json: JSON.stringify(row) });
    this.buffered++;
    if (this.buffered >= this.opts.shardSize) void this.flush().catch(() => undefined);
  }

  /** Resolves once the queue of flushes is short enough: backpressure for fast producers. */
  room(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.pending <= (this.opts.maxPendingFlushes ?? 4)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Write everything buffered so far; resolves when it (and any earlier flush) is on disk. */
  flush(): Promise<void> {
    const batches = [...this.buffers.entries()].filter(([, rows]) => rows.length > 0);
    this.buffers.clear();
    this.buffered = 0;
    if (batches.length === 0) return this.chain;
    this.pending++;
    this.chain = this.chain
      .then(async () => {
        if (this.failure) throw this.failure;
        for (const [kind, rows] of batches) {
          rows.sort((a, b) => a.key - b.key);
          const seq = ++this.seq;
          const name = shardFileName(kind, seq);
          const path = joinPath(this.dir, name);
          const data = Buffer.from(rows.map((r) => r.json + '\n').join(''), 'utf8');
          let target = path;
          let bytes = data.length;
          try {
            // writeFileAtomic removes its temp file when the write fails: a shard is whole or absent.
            await this.host.writeFileAtomic(path, data);
            if (this.opts.indexPath) {
              const entry: ShardIndexEntry = {
                file: name,
                kind,
                seq,
                rows: rows.length,
                bytes: data.length,
                sha256: sha256Hex(data),
              };
              const line = JSON.stringify(entry) + '\n';
              target = this.opts.indexPath;
              bytes = Buffer.byteLength(line);
              await this.host.appendFile(this.opts.indexPath, line);
            }
          } catch (err) {
            const full = await writeFailure(this.host, target, bytes, err);
            this.failure =
              full instanceof DiskFullError
                ? full
                : new Error(`writing shard ${path} failed: ${(err as Error).message}`);
            throw this.failure;
          }
          this.written.push({ kind, seq, path, rows: rows.length });
        }
      })
      .finally(() => {
        this.pending--;
        if (this.pending <= (this.opts.maxPendingFlushes ?? 4) || this.failure) {
          const ws = this.waiters;
          this.waiters = [];
          ws.forEach((w) => w());
        }
      });
    return this.chain;
  }

  /** Final flush and stop the timer. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }
}

/** Shard files of the given kinds in dir, oldest first, without reading them. Temp files are ignored. */
export async function listShardFiles(
  host: Host,
  dir: string,
  kinds: readonly string[],
): Promise<{ shards: { kind: string; seq: number; path: string; name: string; bytes: number }[]; maxSeq: number }> {
  const st = await host.stat(dir);
  if (!st || !st.isDirectory) return { shards: [], maxSeq: 0 };
  const shards: { kind: string; seq: number; path: string; name: string; bytes: number }[] = [];
  let maxSeq = 0;
  for (const f of await host.list(dir)) {
    const name = f.path.slice(f.path.lastIndexOf('/') + 1);
    const m = SHARD_NAME.exec(name);
    if (!m || f.isDirectory) continue;
    const seq = Number(m[2]);
    maxSeq = Math.max(maxSeq, seq);
    if (kinds.includes(m[1])) shards.push({ kind: m[1], seq, path: joinPath(dir, name), name, bytes: f.size });
  }
  shards.sort((a, b) => a.seq - b.seq);
  return { shards, maxSeq };
}

/** The shard index as written; a last line cut short by a crash is ignored. */
export async function readShardIndex(host: Host, path: string): Promise<Map<string, ShardIndexEntry>> {
  const out = new Map<string, ShardIndexEntry>();
  if (!(await host.stat(path))) return out;
  for (const { text } of splitJsonlLines(await host.readFile(path))) {
    try {
      const e = JSON.parse(text) as ShardIndexEntry;
      if (typeof e.file === 'string' && typeof e.sha256 === 'string') out.set(e.file, e);
    } catch {
      // the append a crash interrupted: that shard is checked by its content instead
    }
  }
  return out;
}
