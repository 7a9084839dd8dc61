/**
 * Writing a large jsonl output through a Host without holding it: rows are appended in
 * batches to a hidden temp file next to the target, hashed as they go, and the temp file is
 * renamed over the target only when complete — a reader never sees a partial output.
 */
import { createHash } from 'node:crypto';
import type { Host } from '../../hosts/host.js';
import { writeFailure } from './disk-full.js';
import type { FileEntry } from './jsonl-shards.js';

const BATCH_BYTES = 1 << 20;

export function tempOutputPath(path: string): string {
  const slash = path.lastIndexOf('/');
  return `${path.slice(0, slash + 1)}.${path.slice(slash + 1)}.aerie-partial`;
}

export class JsonlAppender {
  private readonly tmp: string;
  private readonly hash = createHash('sha256');
  private pending: string[] = [];
  private pendingBytes = 0;
  private bytes = 0;
  private rows = 0;
  private started = false;
  private failed: unknown = null;

  constructor(
    private readonly host: Host,
    readonly path: string,
  ) {
    this.tmp = tempOutputPath(path);
  }

  private async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    // A temp file left by an interrupted run would otherwise be appended to.
    await this.host.remove(this.tmp);
    await this.host.writeFileAtomic(this.tmp, '').catch(async (err: unknown) => {
      throw await writeFailure(this.host, this.path, null, err);
    });
  }

  /** Add one row (already JSON text, no newline). */
  async addLine(json: string): Promise<void> {
    const line = json + '\n';
    this.pending.push(line);
    this.pendingBytes += Buffer.byteLength(line);
    this.rows++;
    if (this.pendingBytes >= BATCH_BYTES) await this.drain();
  }

  private async drain(): Promise<void> {
    await this.start();
    if (this.pending.length === 0) return;
    const data = Buffer.from(this.pending.join(''), 'utf8');
    this.pending = [];
    this.pendingBytes = 0;
    this.hash.update(data);
    this.bytes += data.length;
    try {
      await this.host.appendFile(this.tmp, data);
    } catch (err) {
      // The temp file may now end in a cut row, and these rows are gone: never commit it.
      this.failed = await writeFailure(this.host, this.path, data.length, err);
      throw this.failed;
    }
  }

  /** Flush, make the data durable where the host allows it, and rename into place. */
  async commit(): Promise<FileEntry> {
    if (this.failed) throw this.failed;
    await this.drain();
    // appendFile does not fsync; sync(1) with a file argument does (coreutils ≥ 8.24). Best effort.
    await this.host.exec(['sync', '--', this.tmp]).catch(() => undefined);
    await this.host.rename(this.tmp, this.path);
    return { path: this.path, bytes: this.bytes, sha256: this.hash.digest('hex'), rows: this.rows };
  }

  /** Drop the partial output (after a failed check). */
  async discard(): Promise<void> {
    this.pending = [];
    await this.host.remove(this.tmp).catch(() => undefined);
  }
}
