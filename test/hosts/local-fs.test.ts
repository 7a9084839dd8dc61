import { readdir, readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { completeUtf8Length } from '../../src/hosts/util/utf8.js';
import { useLocalHost } from '../support/local-host.js';

const fx = useLocalHost('aerie-fs-', { each: true });
let dir: string;
let host: LocalHost;
beforeEach(async () => {
  ({ dir, host } = fx);
});

describe('writeFileAtomic', () => {
  it('writes and replaces content, leaving no temp files', async () => {
    const p = join(dir, 'ledger.json');
    await host.writeFileAtomic(p, '{"a":1}');
    await host.writeFileAtomic(p, Buffer.from('{"a":2}'));
    expect(await readFile(p, 'utf8')).toBe('{"a":2}');
    expect(await readdir(dir)).toEqual(['ledger.json']);
  });

  it('concurrent writers: the file is one whole version, and no temp files remain', async () => {
    const p = join(dir, 'state.json');
    const versions = Array.from({ length: 20 }, (_, i) => `${String(i).padStart(2, '0')}:${'x'.repeat(100_000)}`);
    await Promise.all(versions.map((v) => host.writeFileAtomic(p, v)));
    expect(versions).toContain(await readFile(p, 'utf8'));
    expect(await readdir(dir)).toEqual(['state.json']);
  });

  it('a failed write leaves no temp file and no target', async () => {
    await expect(host.writeFileAtomic(join(dir, 'missing', 'x.json'), 'x')).rejects.toThrow(/ENOENT/);
    await host.mkdirp(join(dir, 'd'));
    await host.writeFileAtomic(join(dir, 'd', 'x'), 'x');
    // Writing over a directory fails at rename; the temp file must be cleaned up.
    await host.mkdirp(join(dir, 'd', 'sub'));
    await writeFile(join(dir, 'd', 'sub', 'keep'), '');
    await expect(host.writeFileAtomic(join(dir, 'd', 'sub'), 'x')).rejects.toThrow();
    expect((await readdir(join(dir, 'd'))).sort()).toEqual(['sub', 'x']);
  });
});

describe('tailFrom', () => {
  it('reads from an offset and returns where to continue', async () => {
    const p = join(dir, 'server.log');
    await host.appendFile(p, 'hello');
    expect(await host.tailFrom(p, 0)).toEqual({ data: 'hello', offset: 5 });
    expect(await host.tailFrom(p, 5)).toEqual({ data: '', offset: 5 });
    await host.appendFile(p, ' world\n');
    expect(await host.tailFrom(p, 5)).toEqual({ data: ' world\n', offset: 12 });
  });

  it('honours maxBytes', async () => {
    const p = join(dir, 'big.log');
    await writeFile(p, 'abcdefghij');
    expect(await host.tailFrom(p, 2, 3)).toEqual({ data: 'cde', offset: 5 });
    expect(await host.tailFrom(p, 5, 100)).toEqual({ data: 'fghij', offset: 10 });
  });

  it('never splits a UTF-8 character between reads', async () => {
    const p = join(dir, 'utf8.log');
    await writeFile(p, 'aé€😀'); // 1 + 2 + 3 + 4 bytes
    const first = await host.tailFrom(p, 0, 2);
    expect(first).toEqual({ data: 'a', offset: 1 });
    const second = await host.tailFrom(p, first.offset, 5);
    expect(second).toEqual({ data: 'é€', offset: 6 });
    expect(await host.tailFrom(p, second.offset, 4)).toEqual({ data: '😀', offset: 10 });
  });

  it('reads an absent file as empty and a truncated file from the start', async () => {
    const p = join(dir, 'later.log');
    expect(await host.tailFrom(p, 7)).toEqual({ data: '', offset: 7 });
    await writeFile(p, '0123456789');
    await truncate(p, 0);
    await host.appendFile(p, 'new');
    expect(await host.tailFrom(p, 10)).toEqual({ data: 'new', offset: 3 });
  });

  it('defaults to 256 KiB per call', async () => {
    const p = join(dir, 'huge.log');
    await writeFile(p, 'x'.repeat(300 * 1024));
    const r = await host.tailFrom(p, 0);
    expect(r.offset).toBe(256 * 1024);
    expect(r.data).toHaveLength(256 * 1024);
  });
});

describe('other file operations', () => {
  it('stat, list, mkdirp, rename, remove, readFile, freeBytes', async () => {
    expect(await host.stat(join(dir, 'nope'))).toBeNull();
    expect(await host.stat(join(dir, 'nope', 'deeper'))).toBeNull();
    await host.mkdirp(join(dir, 'a', 'b'));
    await host.writeFileAtomic(join(dir, 'z.txt'), '12345');
    expect(await host.stat(join(dir, 'z.txt'))).toMatchObject({
      path: join(dir, 'z.txt'),
      size: 5,
      isDirectory: false,
    });
    const listed = await host.list(dir);
    expect(listed.map((s) => [s.path, s.isDirectory])).toEqual([
      [join(dir, 'a'), true],
      [join(dir, 'z.txt'), false],
    ]);
    await host.rename(join(dir, 'z.txt'), join(dir, 'a', 'y.txt'));
    expect((await host.readFile(join(dir, 'a', 'y.txt'))).toString()).toBe('12345');
    await host.remove(join(dir, 'a'));
    await host.remove(join(dir, 'a')); // absent: no error
    expect(await host.list(dir)).toEqual([]);
    expect(await host.freeBytes(dir)).toBeGreaterThan(0);
  });
});

describe('completeUtf8Length', () => {
  const b = (s: string) => new Uint8Array(Buffer.from(s));
  it('keeps complete text whole and cuts a split character', () => {
    expect(completeUtf8Length(b('abc'))).toBe(3);
    expect(completeUtf8Length(b('a€'))).toBe(4);
    expect(completeUtf8Length(b('a€').subarray(0, 3))).toBe(1);
    expect(completeUtf8Length(b('😀').subarray(0, 3))).toBe(0);
    expect(completeUtf8Length(b('😀'))).toBe(4);
    expect(completeUtf8Length(new Uint8Array([0x80, 0x80]))).toBe(2);
  });
});
