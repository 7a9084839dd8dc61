/** The remote command line and the parsers of the scripts' output (golden). */
import { describe, expect, it } from 'vitest';
import { parseFetch } from '../../src/hosts/ssh/exec.js';
import {
  envWords,
  parseCatIfPresent,
  parseFreeBytes,
  parseListing,
  parseProcStatus,
  parseRecords,
  parseSocketOwner,
  parseStatLine,
  parseTail,
  remoteCommand,
} from '../../src/hosts/ssh/script.js';

describe('remoteCommand', () => {
  it('passes values as quoted positional arguments, after the exec prefix', () => {
    expect(remoteCommand('cat -- "$1"', ["/m/it's $(x)"])).toBe(`exec /bin/sh -c 'cat -- "$1"' sh '/m/it'\\''s $(x)'`);
    expect(remoteCommand('true', [], ['pct', 'exec', '129', '--'])).toBe('exec pct exec 129 -- /bin/sh -c true sh');
  });

  it('refuses environment names that are not names', () => {
    expect(envWords({ B: '$(x)', A: '1' })).toEqual(['A=1', 'B=$(x)']);
    expect(() => envWords({ 'A;rm': 'x' })).toThrow(/not an environment variable name/);
  });
});

describe('parsers', () => {
  it('reads stat and listing output', () => {
    expect(parseStatLine('/a', '12 f 1700000000.250000\n')).toEqual({
      path: '/a',
      size: 12,
      isDirectory: false,
      mtimeMs: 1700000000250,
    });
    expect(parseStatLine('/a', '7 l 1.0')).toBeNull();
    const listing = Buffer.from('4096 d 1.5 sub\0' + '3 f 2.0 name with spaces\0' + '0 l 3.0 dangling\0');
    expect(parseListing('/d', listing).map((f) => [f.path, f.isDirectory])).toEqual([
      ['/d/name with spaces', false],
      ['/d/sub', true],
    ]);
  });

  it('reads tails, free space, process status, records, socket owners and small files', () => {
    expect(parseTail(Buffer.from('absent\n'))).toBeNull();
    expect(parseTail(Buffer.from('5\nhello'))).toEqual({ from: 5, data: Buffer.from('hello') });
    expect(parseFreeBytes('10 4096\n')).toBe(40960);
    expect(parseProcStatus('1 (sh) S 0\n#exit\n0\n\n#present\n')).toEqual({ statLine: '1 (sh) S 0', exitText: '0\n' });
    expect(parseProcStatus('\n#exit\n')).toEqual({ statLine: null, exitText: null });
    expect(parseRecords(Buffer.from('/p/a.json\0{"x":1}\0'))).toEqual([{ path: '/p/a.json', text: '{"x":1}' }]);
    expect(parseSocketOwner('42\npython3 -m sglang.launch_server ')).toEqual({
      pid: 42,
      command: 'python3 -m sglang.launch_server',
    });
    expect(parseSocketOwner('')).toBeNull();
    expect(parseCatIfPresent(Buffer.from('absent'))).toBeNull();
    expect(parseCatIfPresent(Buffer.from('present\n123 456\n'))?.toString()).toBe('123 456\n');
    const f = parseFetch(Buffer.from('3 5\nhelloerr'));
    expect([f.code, f.stdout.toString(), f.stderr.toString()]).toEqual([3, 'hello', 'err']);
  });
});
