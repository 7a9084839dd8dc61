/**
 * Dumps leave the RAM-backed dump folder as SpecForge feature files: batches of finished
 * captures go, one batch at a time, through `python -m aerie_hs.ckpt convert --remove-dumps`
 * on the host (py/aerie_hs/ckpt.py), which writes `rows_<g>-<g+G>/data_<i>.ckpt` under a temp
 * name, renames it into place, appends `{i, id, tokens}` to `<out>/index.jsonl`, and only then
 * deletes the dump. No hidden state passes through the worker: it sends ids and reads lines.
 *
 * One batch at a time because the converter numbers files from the index it appends to. The
 * queue is bounded (whenRoom) so a slow disk holds the prefills back instead of filling RAM.
 */
import type { Host } from '../../hosts/host.js';
import { runAeriePy, type AeriePy, toJsonl } from '../common/index.js';
import type { TokenRow } from './prefill.js';

export type Converted = { ok: true; i: number; tokens: number; bytes: number } | { ok: false; error: string };

/** One line of the converter's output, by sample id. */
export function parseConvertLine(line: string): { id: string; result: Converted } | null {
  const [head, reason] = line.split('\t');
  const w = head!.trim().split(' ');
  switch (w[0]) {
    case 'OK':
    case 'SKIP': {
      // OK <i> <id> <tokens> <bytes>; SKIP <i> <id> (already converted, its file verified)
      const i = Number(w[1]);
      const id = w[2];
      if (!id || !Number.isInteger(i)) return null;
      return { id, result: { ok: true, i, tokens: Number(w[3] ?? NaN), bytes: Number(w[4] ?? NaN) } };
    }
    case 'FAIL':
    case 'MISSING':
    case 'REJECTED':
      return w[1] ? { id: w[1], result: { ok: false, error: `${w[0].toLowerCase()}: ${reason ?? ''}`.trim() } } : null;
    default:
      return null;
  }
}

export interface ConvertOptions {
  host: Host;
  py: AeriePy;
  dumpDir: string;
  outDir: string;
  fileGroupSize: number;
  hiddenSize: number;
  /** Samples per converter run (default 64) and the longest the first waits for the rest (default 500 ms). */
  batch?: number;
  lingerMs?: number;
  onResult(row: TokenRow, result: Converted): void;
}

interface Pending {
  row: TokenRow;
  done: () => void;
}

export class ConvertQueue {
  private queue: Pending[] = [];
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private failure: unknown = null;
  private waiters: (() => void)[] = [];
  private readonly batch: number;
  private seq = 0;

  constructor(private readonly o: ConvertOptions) {
    this.batch = o.batch ?? 64;
  }

  /** Queue a finished capture; resolves once its batch has been converted (or has failed). */
  add(row: TokenRow): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<void>((done) => {
      this.queue.push({ row, done });
      if (this.queue.length >= this.batch) this.kick();
      else this.timer ??= setTimeout(() => this.kick(), this.o.lingerMs ?? 500);
    });
  }

  /** Resolves while fewer than two batches wait: the bound on dumps held in RAM beyond the pool's own. */
  async whenRoom(): Promise<void> {
    while (this.queue.length >= 2 * this.batch && !this.failure) await new Promise<void>((r) => this.waiters.push(r));
    if (this.failure) throw this.failure;
  }

  /** Convert everything queued; rejects with the first converter failure. */
  async drain(): Promise<void> {
    while (this.queue.length > 0 || this.running) {
      this.kick();
      await this.running;
    }
    if (this.failure) throw this.failure;
  }

  private kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.running || this.queue.length === 0) return;
    const take = this.queue.splice(0, this.batch);
    for (const w of this.waiters.splice(0)) w();
    this.running = this.run(take).finally(() => {
      this.running = null;
      if (this.queue.length >= this.batch) this.kick();
      else if (this.queue.length > 0) this.timer ??= setTimeout(() => this.kick(), this.o.lingerMs ?? 500);
    });
  }

  private async run(take: Pending[]): Promise<void> {
    const { host, py, outDir } = this.o;
    const batchPath = `${outDir}/.convert-batch-${process.pid}-${this.seq++}.jsonl`;
    const seen = new Set<string>();
    try {
      await host.writeFileAtomic(batchPath, toJsonl(take.map((p) => p.row)));
      const r = await runAeriePy(
        host,
        py,
        'ckpt',
        [
          'convert',
          '--dumps',
          this.o.dumpDir,
          '--ids',
          batchPath,
          '--out',
          outDir,
          '--file-group-size',
          String(this.o.fileGroupSize),
          '--hidden-size',
          String(this.o.hiddenSize),
          '--remove-dumps',
        ],
        { timeoutMs: 60 * 60_000, okCodes: [0, 1] },
      ); // 1: some samples FAILed, each on its own line
      const byId = new Map(take.map((p) => [p.row.id, p]));
      for (const line of r.stdout.split('\n')) {
        const parsed = parseConvertLine(line);
        const p = parsed && byId.get(parsed.id);
        if (!parsed || !p || seen.has(parsed.id)) continue;
        seen.add(parsed.id);
        this.o.onResult(p.row, parsed.result);
      }
      for (const p of take) {
        if (!seen.has(p.row.id))
          this.o.onResult(p.row, { ok: false, error: 'the converter printed no line for this sample' });
      }
    } catch (err) {
      // The converter itself failed (disk full, interpreter gone): every later batch would too.
      this.failure ??= err;
      for (const w of this.waiters.splice(0)) w();
    } finally {
      await host.remove(batchPath).catch(() => undefined);
      for (const p of take) p.done();
    }
  }
}
