import { describe, expect, it } from 'vitest';
import { isDoneEvent, parseSse, SseParser } from '../../src/bench/sse.js';

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

describe('SseParser', () => {
  it('parses SGLang /generate frames and [DONE]', () => {
    const stream =
      'data: {"text":"Hi","meta_info":{"completion_tokens":1}}\n\n' +
      'data: {"text":"Hi there","meta_info":{"completion_tokens":3}}\n\n' +
      'data: [DONE]\n\n';
    const events = parseSse([stream]);
    expect(events).toEqual([
      { data: '{"text":"Hi","meta_info":{"completion_tokens":1}}' },
      { data: '{"text":"Hi there","meta_info":{"completion_tokens":3}}' },
      { data: '[DONE]' },
    ]);
    expect(events.map(isDoneEvent)).toEqual([false, false, true]);
  });

  it('gives the same events whatever the chunk boundaries (every split point, bytes)', () => {
    const stream = 'data: {"a":1}\r\n\r\ndata: {"b":"é✓"}\n\n: keepalive\n\ndata: [DONE]\r\n\r\n';
    const bytes = enc(stream);
    const expected = [{ data: '{"a":1}' }, { data: '{"b":"é✓"}' }, { data: '[DONE]' }];
    for (let i = 0; i <= bytes.length; i++) {
      for (const j of [i, Math.min(bytes.length, i + 1), Math.min(bytes.length, i + 3)]) {
        const chunks = [bytes.slice(0, i), bytes.slice(i, j), bytes.slice(j)];
        expect(parseSse(chunks), `split at ${i},${j}`).toEqual(expected);
      }
    }
  });

  it('handles a CRLF split between chunks without emitting an extra blank line', () => {
    const p = new SseParser();
    expect(p.push('data: x\r')).toEqual([]);
    expect(p.push('\n')).toEqual([]);
    expect(p.push('\r')).toEqual([{ data: 'x' }]);
    expect(p.push('\ndata: y\n\n')).toEqual([{ data: 'y' }]);
  });

  it('treats a lone CR as a line end', () => {
    expect(parseSse(['data: a\r\rdata: b\r\r'])).toEqual([{ data: 'a' }, { data: 'b' }]);
  });

  it('joins multi-line data, keeps event/id, drops comments and one leading space only', () => {
    const events = parseSse([': comment\nevent: update\nid: 7\ndata:first\ndata:  second\nretry: 10\n\n']);
    expect(events).toEqual([{ data: 'first\n second', event: 'update', id: '7' }]);
  });

  it('ignores blank lines with no data and a leading BOM', () => {
    expect(parseSse(['\uFEFF\n\n\ndata: z\n\n\n'])).toEqual([{ data: 'z' }]);
  });

  it('dispatches a final event lacking its blank line at end()', () => {
    const p = new SseParser();
    expect(p.push('data: {"text":"a"}\n\ndata: [DONE]')).toEqual([{ data: '{"text":"a"}' }]);
    expect(p.end()).toEqual([{ data: '[DONE]' }]);
  });

  it('reports a stream error frame as an ordinary event', () => {
    expect(parseSse(['data: {"error": {"message": "boom"}}\n\n'])).toEqual([
      { data: '{"error": {"message": "boom"}}' },
    ]);
  });

  it('parses a 5000-event stream fed in 97-character chunks', () => {
    const frame = `data: {"text":"${'x'.repeat(200)}"}\n\n`;
    const stream = frame.repeat(5000);
    const p = new SseParser();
    let count = 0;
    for (let i = 0; i < stream.length; i += 97) count += p.push(stream.slice(i, i + 97)).length;
    count += p.end().length;
    expect(count).toBe(5000);
  });
});
