// Incremental Server-Sent-Events parser for SGLang's streaming responses.
//
// Push chunks as they arrive from the socket (Buffers or strings); get back the
// events completed by that chunk. It keeps only the unfinished line and the data of
// the unfinished event, so the work per chunk is proportional to the chunk, never to
// everything received so far (a 250-way benchmark must not spend its event loop here).
//
// Follows the WHATWG event-stream rules that matter for SGLang: lines end in LF, CRLF
// or CR (a CRLF may be split across chunks); `data:` lines accumulate, joined by LF;
// a blank line dispatches; `:` lines are comments; one leading space after the colon
// is dropped; a BOM at the start is ignored; UTF-8 sequences split across chunks are
// decoded correctly. One leniency: `end()` dispatches a final event that lacks its
// blank line (bench_serving reads line by line and would count it too).

export interface SseEvent {
  /** The event's data lines joined with '\n' (for SGLang: one JSON document or `[DONE]`). */
  data: string;
  /** The `event:` field, when the server set one. */
  event?: string;
  /** The `id:` field, when the server set one. */
  id?: string;
}

/** The data of the sentinel SGLang sends last on every stream. */
export const SSE_DONE = '[DONE]';

export function isDoneEvent(e: SseEvent): boolean {
  return e.data === SSE_DONE;
}

export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  private partialLine = '';
  private dataLines: string[] = [];
  private eventType: string | undefined;
  private eventId: string | undefined;
  private skipLeadingLf = false;
  private atStreamStart = true;

  /** Feed the next chunk; returns the events it completed, in order. */
  push(chunk: Uint8Array | string): SseEvent[] {
    const text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    return this.consume(text);
  }

  /** The stream ended: flush the decoder and dispatch an event left without its blank line. */
  end(): SseEvent[] {
    const out = this.consume(this.decoder.decode());
    if (this.partialLine.length > 0) {
      this.processLine(this.partialLine, out);
      this.partialLine = '';
    }
    this.dispatch(out);
    return out;
  }

  private consume(text: string): SseEvent[] {
    const out: SseEvent[] = [];
    if (text.length === 0) return out;
    let start = 0;
    if (this.skipLeadingLf) {
      this.skipLeadingLf = false;
      if (text.charCodeAt(0) === 0x0a) start = 1;
    }
    if (this.atStreamStart && start < text.length) {
      this.atStreamStart = false;
      if (text.charCodeAt(start) === 0xfeff) start += 1;
    }
    const n = text.length;
    let i = start;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) {
        i++;
        continue;
      }
      const piece = text.slice(start, i);
      const line = this.partialLine.length > 0 ? this.partialLine + piece : piece;
      this.partialLine = '';
      this.processLine(line, out);
      if (c === 0x0d) {
        if (i + 1 < n) {
          if (text.charCodeAt(i + 1) === 0x0a) i++;
        } else {
          // The LF of a CRLF may arrive in the next chunk.
          this.skipLeadingLf = true;
        }
      }
      i++;
      start = i;
    }
    if (start < n) this.partialLine += text.slice(start);
    return out;
  }

  private processLine(line: string, out: SseEvent[]): void {
    if (line.length === 0) {
      this.dispatch(out);
      return;
    }
    if (line.charCodeAt(0) === 0x3a /* ':' comment */) return;
    const colon = line.indexOf(':');
    let field: string;
    let value: string;
    if (colon < 0) {
      field = line;
      value = '';
    } else {
      field = line.slice(0, colon);
      value = line.charCodeAt(colon + 1) === 0x20 ? line.slice(colon + 2) : line.slice(colon + 1);
    }
    switch (field) {
      case 'data':
        this.dataLines.push(value);
        break;
      case 'event':
        this.eventType = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.eventId = value;
        break;
      default:
        // `retry` and unknown fields carry nothing a benchmark needs.
        break;
    }
  }

  private dispatch(out: SseEvent[]): void {
    if (this.dataLines.length === 0) {
      this.eventType = undefined;
      return;
    }
    const ev: SseEvent = { data: this.dataLines.length === 1 ? this.dataLines[0] : this.dataLines.join('\n') };
    if (this.eventType !== undefined) ev.event = this.eventType;
    if (this.eventId !== undefined) ev.id = this.eventId;
    out.push(ev);
    this.dataLines = [];
    this.eventType = undefined;
  }
}

/** Parse a whole stream given as chunks (for tests and small bodies). */
export function parseSse(chunks: Iterable<Uint8Array | string>): SseEvent[] {
  const p = new SseParser();
  const out: SseEvent[] = [];
  for (const c of chunks) out.push(...p.push(c));
  out.push(...p.end());
  return out;
}
