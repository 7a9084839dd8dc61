/**
 * Reading a large jsonl file on a host a piece at a time, through Host.tailFrom (the only
 * ranged read the Host interface has), so a 100k-sample input never sits in memory whole.
 *
 * Line numbers are 1-based physical lines (blank lines count, but are not yielded), the same
 * numbering splitJsonlLines gives, so rejects name the line an editor shows.
 */
import { createHash } from 'node:crypto';
import type { Host } from '../../hosts/host.js';
import type { NumberedLine } from './jsonl-shards.js';

export const DEFAULT_CHUNK_BYTES = 1 << 20;

export interface LinePosition {
  offset: number;
  lineNo: number;
}

/**
 * A cursor over one file's lines: buffered reads of chunkBytes, one complete line at a time.
 * A line longer than a chunk is assembled across reads.
 */
export class HostLineReader {
  private offset: number;
  private buffer = '';
  private eof = false;
  private lineNo: number;

  /** `from`: start mid-file at a line boundary (a byte offset position() gave) with the lines before it counted. */
  constructor(
    private readonly host: Host,
    readonly path: string,
    private readonly chunkBytes = DEFAULT_CHUNK_BYTES,
    from: LinePosition = { offset: 0, lineNo: 0 },
  ) {
    this.offset = from.offset;
    this.lineNo = from.lineNo;
  }

  /** Where the next line starts: its byte offset and the lines before it (blank ones included). */
  position(): LinePosition {
    // tailFrom hands back whole UTF-8 characters, so the text still buffered is exactly its bytes.
    return { offset: this.offset - Buffer.byteLength(this.buffer, 'utf8'), lineNo: this.lineNo };
  }

  /** The next line (blank ones included), or null at the end of the file. */
  async nextRaw(): Promise<NumberedLine | null> {
    for (;;) {
      const nl = this.buffer.indexOf('\n');
      if (nl !== -1) {
        let text = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        if (text.endsWith('\r')) text = text.slice(0, -1);
        return { lineNo: ++this.lineNo, text };
      }
      if (this.eof) {
        if (this.buffer === '') return null;
        let text = this.buffer;
        this.buffer = '';
        if (text.endsWith('\r')) text = text.slice(0, -1);
        return { lineNo: ++this.lineNo, text };
      }
      const chunk = await this.host.tailFrom(this.path, this.offset, this.chunkBytes);
      // tailFrom restarts at 0 when the file shrank: the input was replaced under us.
      if (chunk.offset < this.offset) throw new Error(`${this.path} shrank while it was being read; was it replaced?`);
      if (chunk.data === '') this.eof = true;
      this.offset = chunk.offset;
      this.buffer += chunk.data;
    }
  }

  /** The next non-blank line, or null at the end. */
  async next(): Promise<NumberedLine | null> {
    for (;;) {
      const line = await this.nextRaw();
      if (line === null || line.text.trim() !== '') return line;
    }
  }
}

/** Non-blank lines of a host file, in order; stops after `limit` of them when given. */
export async function* streamLines(
  host: Host,
  path: string,
  opts: { limit?: number; chunkBytes?: number } = {},
): AsyncGenerator<NumberedLine> {
  const reader = new HostLineReader(host, path, opts.chunkBytes);
  let n = 0;
  while (opts.limit === undefined || n < opts.limit) {
    const line = await reader.next();
    if (line === null) return;
    n++;
    yield line;
  }
}

/**
 * sha256 of the file (of its text as read, which is its bytes for valid UTF-8) and how many
 * non-blank lines it has, in one streaming pass. Cheap next to regenerating the set, and it
 * gives the heartbeat its total before the first request.
 */
export async function digestLines(
  host: Host,
  path: string,
  chunkBytes = DEFAULT_CHUNK_BYTES,
): Promise<{ sha256: string; lines: number }> {
  const hash = createHash('sha256');
  let offset = 0;
  let lines = 0;
  let tail = '';
  for (;;) {
    const chunk = await host.tailFrom(path, offset, chunkBytes);
    if (chunk.offset < offset) throw new Error(`${path} shrank while it was being read; was it replaced?`);
    if (chunk.data === '') break;
    offset = chunk.offset;
    hash.update(chunk.data, 'utf8');
    const parts = (tail + chunk.data).split('\n');
    tail = parts.pop()!;
    for (const p of parts) if (p.trim() !== '') lines++;
  }
  if (tail.trim() !== '') lines++;
  return { sha256: hash.digest('hex'), lines };
}
