import { describe, expect, it } from 'vitest';
import {
  expectedDumpBytes,
  formatBytes,
  planExtract,
  shardDirName,
} from '../../src/stages/extract-plan.js';
import { splitJsonlLines } from '../../src/stages/jsonl.js';

describe('extract plan arithmetic', () => {
  it('groups files 2000 per directory like SpecForge', () => {
    expect(shardDirName(0)).toBe('rows_0-2000');
    expect(shardDirName(1999)).toBe('rows_0-2000');
    expect(shardDirName(2000)).toBe('rows_2000-4000');
    expect(shardDirName(123456)).toBe('rows_122000-124000');
  });

  it('sizes a dump as tokens × 3 × hidden × 2 bytes', () => {
    expect(expectedDumpBytes(10, 512)).toBe(30720);
  });

  it('formats bytes for people', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(11 * 1024 ** 4)).toBe('11.0 TiB');
  });
});

describe('planExtract', () => {
  it('indexes by line position, estimates words, and turns bad lines into errors', () => {
    const ok = (id: string, q: string) => JSON.stringify({ id, conversations: [{ role: 'user', content: q }] });
    const lines = splitJsonlLines([ok('a', 'one two'), '{bad', ok('a/b', 'x'), ok('a', 'dup'), ok('c', 'three')].join('\n'));
    const { items, errors } = planExtract(lines);
    expect(items.map((i) => [i.id, i.index, i.file, i.estTokens])).toEqual([
      ['a', 0, 'rows_0-2000/a.hs', 3],
      ['c', 4, 'rows_0-2000/c.hs', 2],
    ]);
    expect(errors.map((e) => [e.line, e.error.split(':')[0]])).toEqual([
      [2, 'bad JSON'],
      [3, 'unsafe id'],
      [4, 'duplicate id'],
    ]);
  });
});
