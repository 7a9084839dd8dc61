import { describe, expect, it } from 'vitest';
import { firstKeyIs, objectValueRange, stringValueState, valueStart } from '../../src/bench/json-scan.js';
import { parseSse } from '../../src/bench/sse.js';
import { eventData, SseByteFramer, type FramedEvent } from '../../src/bench/sse-bytes.js';

const frame = (n: number) =>
  `data: ${JSON.stringify({ text: 'tok '.repeat(n) + 'é✓', output_ids: Array.from({ length: n }, (_, i) => 1000 + i), meta_info: { completion_tokens: n, e2e_latency: n / 1000 } })}\n\n`;

function framed(chunks: Buffer[]): string[] {
  const f = new SseByteFramer();
  const out: FramedEvent[] = [];
  for (const c of chunks) out.push(...f.push(c));
  out.push(...f.end());
  return out.map(eventData);
}

describe('SseByteFramer', () => {
  it('gives the same events as the string parser whatever the chunk boundaries (every split point)', () => {
    const stream =
      ': keepalive\n\n' +
      frame(1) +
      frame(2) +
      'event: x\nid: 3\ndata: a\ndata:  b\n\n\n' +
      frame(3) +
      'data: [DONE]\n\n';
    const bytes = Buffer.from(stream);
    const expected = parseSse([stream]).map((e) => e.data);
    expect(expected).toHaveLength(5);
    for (let i = 0; i <= bytes.length; i++) {
      for (const j of [i, Math.min(bytes.length, i + 1), Math.min(bytes.length, i + 7)]) {
        expect(framed([bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)]), `split at ${i},${j}`).toEqual(
          expected,
        );
      }
    }
  });

  it('hands single-line data payloads back as byte views, without decoding them', () => {
    const f = new SseByteFramer();
    const events = f.push(Buffer.from(frame(2) + 'data:[DONE]\n\n'));
    expect(events.every((e) => Buffer.isBuffer(e))).toBe(true);
    expect(eventData(events[1]!)).toBe('[DONE]');
  });

  it('switches to the string parser for CR line ends and a leading BOM is dropped', () => {
    const stream = '\uFEFFdata: {"a":1}\r\n\r\ndata: [DONE]\r\n\r\n';
    const bytes = Buffer.from(stream);
    for (let i = 0; i <= bytes.length; i++) {
      expect(framed([bytes.subarray(0, i), bytes.subarray(i)]), `split at ${i}`).toEqual(['{"a":1}', '[DONE]']);
    }
  });

  it('dispatches a last event without its blank line at end()', () => {
    expect(framed([Buffer.from('data: {"x":1}\n\ndata: [DONE]')])).toEqual(['{"x":1}', '[DONE]']);
    expect(framed([Buffer.from('data: [DONE]\n')])).toEqual(['[DONE]']);
  });
});

describe('json-scan', () => {
  const b = (s: string) => Buffer.from(s);

  it('finds a key by its bytes and skips a string value equal to the key name', () => {
    const buf = b('{"text": "meta_info", "meta_info" : {"completion_tokens": 3, "x": "}{\\"}"}}');
    const r = objectValueRange(buf, 'meta_info');
    expect(r).toBeDefined();
    expect(JSON.parse(buf.toString('utf8', r![0], r![1]))).toEqual({ completion_tokens: 3, x: '}{"}' });
    expect(objectValueRange(buf, 'meta_info', true)).toEqual(r);
  });

  it('never matches text inside a string, where quotes are escaped', () => {
    const buf = b(
      JSON.stringify({ text: 'say "meta_info": {"completion_tokens": 99}', meta_info: { completion_tokens: 1 } }),
    );
    const r = objectValueRange(buf, 'meta_info')!;
    expect(JSON.parse(buf.toString('utf8', r[0], r[1]))).toEqual({ completion_tokens: 1 });
  });

  it('tells empty, non-empty, absent and non-string values apart', () => {
    expect(stringValueState(b('{"text":"","meta_info":{}}'), 'text')).toBe('empty');
    expect(stringValueState(b('{"text": "a"}'), 'text')).toBe('non-empty');
    expect(stringValueState(b('{"text": null}'), 'text')).toBe('not-a-string');
    expect(stringValueState(b('{"meta_info": {}}'), 'text')).toBe('absent');
    expect(valueStart(b('{"a":1}'), 'b')).toBe(-1);
  });

  it('recognises an error frame by its first key', () => {
    expect(firstKeyIs(b(' { "error": {"message": "x"}}'), 'error')).toBe(true);
    expect(firstKeyIs(b('{"text": "error", "error": null}'), 'error')).toBe(false);
  });
});
