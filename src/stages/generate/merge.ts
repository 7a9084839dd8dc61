/**
 * Merging a stage's shards into its output files in input order, streaming: every shard is a
 * run sorted by input line (the ShardWriter sorts at flush), so a k-way merge over buffered
 * cursors writes each output row by row. Memory is one small buffer per shard, never the
 * dataset. With very many shards the merge runs in passes (FAN_IN at a time).
 */
import type { Host } from '../../hosts/host.js';
import { HostLineReader, JsonlAppender } from '../common/index.js';

const CURSOR_CHUNK = 16 << 10;
export const FAN_IN = 256;

export interface MergeSource {
  path: string;
  /** Earlier sources win ties: on a duplicate key the first one is kept. */
  order: number;
}

/**
 * Where a row (its JSON text) belongs: its input line, or null when the row is not part of
 * this run's input. Throws when the text is not a row at all.
 */
export type LineOf = (text: string) => number | null;

class Cursor {
  private reader: HostLineReader;
  head: { lineNo: number; text: string } | null = null;

  constructor(
    host: Host,
    readonly source: MergeSource,
    private readonly lineOf: LineOf,
  ) {
    this.reader = new HostLineReader(host, source.path, CURSOR_CHUNK);
  }

  /** Move to the next row that belongs to the input; null head at the end. */
  async advance(): Promise<void> {
    for (;;) {
      const line = await this.reader.next();
      if (line === null) {
        this.head = null;
        return;
      }
      let lineNo: number | null;
      try {
        lineNo = this.lineOf(line.text);
      } catch {
        // Shards are written atomically, so this is damage from outside aerie: say where.
        throw new Error(
          `corrupt shard ${this.source.path} line ${line.lineNo}: not JSON; remove the file to redo its rows`,
        );
      }
      if (lineNo === null) continue;
      this.head = { lineNo, text: line.text };
      return;
    }
  }
}

/** A binary heap of cursors by (head line, source order). */
class CursorHeap {
  private items: Cursor[] = [];
  get size(): number {
    return this.items.length;
  }
  private less(a: Cursor, b: Cursor): boolean {
    const x = a.head!.lineNo;
    const y = b.head!.lineNo;
    return x !== y ? x < y : a.source.order < b.source.order;
  }
  push(c: Cursor): void {
    const a = this.items;
    a.push(c);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }
  pop(): Cursor | undefined {
    const a = this.items;
    if (a.length === 0) return undefined;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.less(a[l]!, a[m]!)) m = l;
        if (r < a.length && this.less(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}

/**
 * Merge sorted sources into `emit` in line order, each line at most once (`taken` records the
 * lines already emitted, across calls, so a line can never land in two outputs).
 */
async function mergeInto(
  host: Host,
  sources: MergeSource[],
  lineOf: LineOf,
  taken: Set<number>,
  emit: (text: string, lineNo: number) => Promise<void>,
): Promise<void> {
  const heap = new CursorHeap();
  for (const s of sources) {
    const c = new Cursor(host, s, lineOf);
    await c.advance();
    if (c.head) heap.push(c);
  }
  while (heap.size > 0) {
    const c = heap.pop()!;
    const { lineNo, text } = c.head!;
    if (!taken.has(lineNo)) {
      taken.add(lineNo);
      await emit(text, lineNo);
    }
    await c.advance();
    if (c.head) heap.push(c);
  }
}

/**
 * Merge the shards of one kind into `out` (an appender, committed by the caller). Returns the
 * number of rows written. `scratchDir` holds intermediate runs when there are more than
 * FAN_IN shards; they are removed afterwards.
 */
export async function mergeShards(
  host: Host,
  shards: MergeSource[],
  lineOf: LineOf,
  taken: Set<number>,
  out: JsonlAppender,
  scratchDir: string,
  /** Applied to each row as it is written to `out` (never to intermediate runs). */
  rewrite: (text: string) => string = (text) => text,
): Promise<number> {
  let sources = shards.slice().sort((a, b) => a.order - b.order);
  let pass = 0;
  const scratch: string[] = [];
  try {
    while (sources.length > FAN_IN) {
      pass++;
      await host.mkdirp(scratchDir);
      const next: MergeSource[] = [];
      for (let g = 0; g < sources.length; g += FAN_IN) {
        const group = sources.slice(g, g + FAN_IN);
        const path = `${scratchDir}/pass${pass}-run${next.length}.jsonl`;
        const run = new JsonlAppender(host, path);
        // Intermediate runs keep duplicates' first copy only within the group; `taken` is
        // only for the final pass, so a local set stands in here.
        try {
          await mergeInto(host, group, lineOf, new Set<number>(), (text) => run.addLine(text));
          await run.commit();
        } catch (err) {
          await run.discard();
          throw err;
        }
        scratch.push(path);
        next.push({ path, order: next.length });
      }
      sources = next;
    }
    let rows = 0;
    await mergeInto(host, sources, lineOf, taken, async (text) => {
      rows++;
      await out.addLine(rewrite(text));
    });
    return rows;
  } finally {
    for (const p of scratch) await host.remove(p).catch(() => undefined);
  }
}
