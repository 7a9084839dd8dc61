// Byte-level SSE framing for the load generator's hot path.
//
// SGLang sends one `data: <json>\n\n` frame per decode step, and the /generate JSON
// repeats the whole text so far: at 250 streams of 256 tokens a client receives
// hundreds of MB of frames it never needs to decode as text. This framer finds frame
// boundaries in the raw bytes and hands back each single-line `data:` payload as a
// Buffer view, so the caller decodes only the few bytes it reads (see tally.ts).
//
// Anything unusual is delegated to the string parser in sse.ts, which implements the
// full WHATWG rules: a block with several lines (event:, id:, comments, multi-line
// data) is parsed there, and a stream that ever sends a CR switches to it for good.

import { SseParser, type SseEvent } from './sse.js';

/** A single-line data payload as bytes (fast path), or an event parsed by SseParser. */
export type FramedEvent = Buffer | SseEvent;

const LF = 0x0a;
const CR = 0x0d;
const BLANK_LINE = Buffer.from('\n\n');
const DATA = Buffer.from('data:');

export class SseByteFramer {
  private pending: Buffer | undefined;
  private slow: SseParser | undefined;
  private atStreamStart = true;

  push(chunk: Buffer): FramedEvent[] {
    if (this.slow) return this.slow.push(chunk);
    let buf = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = undefined;
    if (this.atStreamStart && buf.length > 0) {
      if (buf.length < 3 && buf[0] === 0xef) {
        this.pending = buf; // might be the start of a BOM
        return [];
      }
      this.atStreamStart = false;
      if (buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) buf = buf.subarray(3);
    }
    if (chunk.indexOf(CR) >= 0) {
      // CR line ends (CRLF, lone CR) are legal but SGLang never sends them: the string
      // parser handles them, from the start of the current unfinished block on.
      this.slow = new SseParser();
      return this.slow.push(buf);
    }
    const out: FramedEvent[] = [];
    let start = 0;
    for (;;) {
      const end = buf.indexOf(BLANK_LINE, start);
      if (end < 0) break;
      this.block(buf, start, end, out);
      start = end + 2;
    }
    if (start < buf.length) this.pending = buf.subarray(start);
    return out;
  }

  /** The stream ended: a last block without its blank line still counts (like SseParser.end). */
  end(): FramedEvent[] {
    if (this.slow) return this.slow.end();
    const rest = this.pending;
    this.pending = undefined;
    return rest && rest.length > 0 ? parseBlock(rest.toString('utf8')) : [];
  }

  private block(buf: Buffer, start: number, end: number, out: FramedEvent[]): void {
    // Leading LFs are blank lines: they dispatch nothing.
    while (start < end && buf[start] === LF) start++;
    if (start === end) return;
    const line = buf.indexOf(LF, start);
    if ((line < 0 || line >= end) && startsWithData(buf, start)) {
      let p = start + DATA.length;
      if (buf[p] === 0x20) p++;
      out.push(buf.subarray(p, end));
      return;
    }
    out.push(...parseBlock(buf.toString('utf8', start, end)));
  }
}

function startsWithData(buf: Buffer, at: number): boolean {
  return buf.length - at >= DATA.length && buf.compare(DATA, 0, DATA.length, at, at + DATA.length) === 0;
}

function parseBlock(text: string): SseEvent[] {
  const p = new SseParser();
  return [...p.push(text + '\n\n'), ...p.end()];
}

/** The payload as text, whichever path framed it. */
export function eventData(e: FramedEvent): string {
  return Buffer.isBuffer(e) ? e.toString('utf8') : e.data;
}
