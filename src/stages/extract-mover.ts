/**
 * Moves verified dumps from the RAM dump dir into the output tree in batches, one
 * Host.moveFiles call per batch, while the extraction workers go on prefilling.
 *
 * Why batches, and why the workers do not wait for them: on an SSH host a cross-filesystem
 * move needs a process on the host, and starting one costs a session channel plus the login
 * shell (~100 ms, more where .bashrc runs conda init) — per sample that was most of the
 * extraction's time. A batch pays it once for up to `maxBatch` files. Handing the dump off
 * keeps the server busy meanwhile; `maxPending` bounds how many dumps (RAM) wait their turn.
 *
 * When a batch goes: as soon as `maxBatch` moves are queued, or `lingerMs` after the first
 * of them was, whichever is first; one batch at a time (the disk is the limit, and a second
 * channel would only split the batch). drain() sends what is left at once.
 *
 * A move counts as landed only when the host says it moved and a stat shows the destination
 * at exactly the expected size; anything else is an OutputWriteError for that move.
 */
import type { Host } from '../hosts/host.js';
import { OutputWriteError } from './extract-dump.js';

export interface DumpMove {
  from: string;
  to: string;
  /** The size the destination must have once moved. */
  bytes: number;
}

export interface MoverOptions {
  maxBatch?: number;
  lingerMs?: number;
  /** Queued plus in flight; whenRoom() waits beyond it (default 2 × maxBatch). */
  maxPending?: number;
}

interface Entry {
  move: DumpMove;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export const DEFAULT_MOVE_BATCH = 256;
export const DEFAULT_MOVE_LINGER_MS = 1_000;

export class DumpMover {
  private readonly maxBatch: number;
  private readonly lingerMs: number;
  private readonly maxPending: number;
  private queue: Entry[] = [];
  private inFlight = 0;
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private draining = false;
  private roomWaiters: (() => void)[] = [];
  private idleWaiters: (() => void)[] = [];
  /** Batch sizes sent so far (for tests and the bench). */
  readonly batches: number[] = [];

  constructor(
    private readonly host: Pick<Host, 'moveFiles' | 'stat'>,
    opts: MoverOptions = {},
  ) {
    this.maxBatch = Math.max(1, Math.floor(opts.maxBatch ?? DEFAULT_MOVE_BATCH));
    this.lingerMs = Math.max(0, opts.lingerMs ?? DEFAULT_MOVE_LINGER_MS);
    this.maxPending = Math.max(this.maxBatch, Math.floor(opts.maxPending ?? 2 * this.maxBatch));
  }

  get pending(): number {
    return this.queue.length + this.inFlight;
  }

  /** Resolves once fewer than maxPending moves are queued or in flight. */
  whenRoom(): Promise<void> {
    if (this.pending < this.maxPending) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /** Queue a move; settles when the file is at its destination at the expected size, or cannot be. */
  move(move: DumpMove): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ move, resolve, reject });
      this.schedule();
    });
  }

  /** Send everything queued now and resolve when no move is queued or in flight. Never rejects. */
  drain(): Promise<void> {
    this.draining = true;
    this.schedule();
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private schedule(): void {
    if (this.running || this.queue.length === 0) return;
    if (this.draining || this.queue.length >= this.maxBatch || this.lingerMs === 0) return this.start();
    this.timer ??= setTimeout(() => this.start(), this.lingerMs);
  }

  private start(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.running || this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.maxBatch);
    this.inFlight = batch.length;
    this.batches.push(batch.length);
    this.running = this.send(batch).finally(() => {
      this.inFlight = 0;
      this.running = null;
      for (const wake of this.roomWaiters.splice(0)) wake();
      if (this.pending === 0) for (const wake of this.idleWaiters.splice(0)) wake();
      this.schedule();
    });
  }

  private async send(batch: Entry[]): Promise<void> {
    let outcomes;
    try {
      outcomes = await this.host.moveFiles(batch.map((e) => ({ from: e.move.from, to: e.move.to })));
    } catch (err) {
      for (const e of batch) e.reject(err);
      return;
    }
    await Promise.all(batch.map((e, i) => this.settle(e, outcomes[i])));
  }

  private async settle(e: Entry, outcome: { ok: true } | { ok: false; error: string } | undefined): Promise<void> {
    const { from, to, bytes } = e.move;
    if (!outcome || !outcome.ok) {
      return e.reject(new OutputWriteError(`moving ${from} to ${to} failed: ${outcome ? outcome.error : 'no outcome reported'}`));
    }
    try {
      const st = await this.host.stat(to);
      if (st && st.size === bytes) return e.resolve();
      e.reject(new OutputWriteError(`${to} has ${st ? st.size : 'no'} bytes after the move, expected ${bytes}`));
    } catch (err) {
      e.reject(err);
    }
  }
}

/** A move script's staging that has not changed for this long belongs to a script that died. */
export const STALE_STAGING_MS = 3600_000;

/**
 * Staged copies (`.aerie-mv.*` directories, `.<name>.<pid>.aerie-mv` files) a move script
 * leaves in the output directories only when it is itself killed (host reboot, OOM): dumps
 * are tens of MB each, so they are reclaimed before the space check. Young ones are left
 * alone, since a script from an attempt whose worker died may still be copying.
 */
export async function sweepStagedMoves(host: Host, outDir: string, now = Date.now()): Promise<number> {
  let swept = 0;
  for (const dir of await host.list(outDir)) {
    if (!dir.isDirectory) continue;
    for (const f of await host.list(dir.path)) {
      const name = f.path.slice(f.path.lastIndexOf('/') + 1);
      const staged = name.startsWith('.aerie-mv.') || (name.startsWith('.') && name.endsWith('.aerie-mv'));
      if (staged && now - f.mtimeMs > STALE_STAGING_MS) {
        await host.remove(f.path);
        swept++;
      }
    }
  }
  return swept;
}
