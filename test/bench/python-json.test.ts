import { describe, expect, it } from 'vitest';
import { formatJsonLine, parseJsonLine, parseJsonLines } from '../../src/bench/python-json.js';

describe('bench_serving JSONL lines', () => {
  it('writes like Python json.dumps: separators, bare non-finite numbers, null, ASCII escapes', () => {
    const line = formatJsonLine({
      a: 1,
      b: Infinity,
      c: -Infinity,
      d: NaN,
      e: null,
      f: 'é"x',
      g: [1, 'two'],
      h: { i: true },
      u: undefined,
    });
    expect(line).toBe(
      '{"a": 1, "b": Infinity, "c": -Infinity, "d": NaN, "e": null, "f": "\\u00e9\\"x", "g": [1, "two"], "h": {"i": true}}',
    );
  });

  it('reads a bench_serving line with Infinity, leaving the word inside strings alone', () => {
    const v = parseJsonLine(
      '{"backend": "sglang", "request_rate": Infinity, "note": "rate Infinity \\" NaN", "x": -Infinity, "y": NaN}',
    );
    expect(v).toEqual({ backend: 'sglang', request_rate: Infinity, note: 'rate Infinity " NaN', x: -Infinity, y: NaN });
  });

  it('round-trips and skips blank lines', () => {
    const a = { request_rate: Infinity, max_concurrency: 8, accept_length: null, s: '✓' };
    const b = { request_rate: 2.5, max_concurrency: null };
    expect(parseJsonLines(`${formatJsonLine(a)}\n\n${formatJsonLine(b)}\r\n`)).toEqual([a, b]);
  });
});
