/**
 * LocalHost.moveFiles on real files: rename within a filesystem, and across one (a tmpfs
 * this test mounts, as /dev/shm is beside a disk on a GPU host) a copy that is never seen
 * partial at the destination and never leaves the source behind when it succeeded.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalHost } from '../../src/hosts/local.js';
import { mountTmpfs, type Tmpfs } from '../support/tmpfs.js';

let root: string;
let ram: Tmpfs;
let tiny: Tmpfs;
let host: LocalHost;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'aerie-lmove-'));
  ram = await mountTmpfs(root, 256);
  tiny = await mountTmpfs(root, 1);
  host = new LocalHost({ name: 'local', workdir: join(root, 'work') });
});

afterAll(async () => {
  await ram?.unmount();
  await tiny?.unmount();
  await rm(root, { recursive: true, force: true });
});

/** A fresh directory pair for one test; the contents differ per file so a mix-up shows. */
async function dirs(name: string, from = join(root, 'disk')): Promise<{ src: string; dst: string }> {
  const src = join(from, `${name}-src`);
  const dst = join(root, 'out', name);
  await mkdir(src, { recursive: true });
  await mkdir(dst, { recursive: true });
  return { src, dst };
}
const content = (i: number, size = 4096) => Buffer.concat([Buffer.from(`file ${i}\n`), Buffer.alloc(size, i % 251)]);

describe('LocalHost.moveFiles', () => {
  it('renames within a filesystem, replacing an existing destination', async () => {
    const { src, dst } = await dirs('same');
    for (let i = 0; i < 3; i++) await writeFile(join(src, `${i}.hs`), content(i));
    await writeFile(join(dst, '1.hs'), 'old');
    const out = await host.moveFiles([0, 1, 2].map((i) => ({ from: join(src, `${i}.hs`), to: join(dst, `${i}.hs`) })));
    expect(out).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
    expect(await readdir(src)).toEqual([]);
    for (let i = 0; i < 3; i++) expect(await readFile(join(dst, `${i}.hs`))).toEqual(content(i));
  });

  it('copies across filesystems (EXDEV): whole at the destination, source gone, no temp file left', async () => {
    const { src, dst } = await dirs('across', ram.path);
    expect((await stat(src)).dev).not.toBe((await stat(dst)).dev);
    for (let i = 0; i < 5; i++) await writeFile(join(src, `${i}.hs`), content(i, 100_000));
    const out = await host.moveFiles([0, 1, 2, 3, 4].map((i) => ({ from: join(src, `${i}.hs`), to: join(dst, `${i}.hs`) })));
    expect(out.every((o) => o.ok)).toBe(true);
    expect(await readdir(src)).toEqual([]);
    expect((await readdir(dst)).sort()).toEqual(['0.hs', '1.hs', '2.hs', '3.hs', '4.hs']);
    for (let i = 0; i < 5; i++) expect(await readFile(join(dst, `${i}.hs`))).toEqual(content(i, 100_000));
  });

  it('never shows a partial destination while a large file crosses filesystems', async () => {
    const { src, dst } = await dirs('watched', ram.path);
    const size = 96 << 20;
    await writeFile(join(src, 'big.hs'), Buffer.alloc(size, 3));
    const target = join(dst, 'big.hs');
    const seen = new Set<number>();
    let moving = true;
    const watcher = (async () => {
      while (moving) {
        const st = await stat(target).catch(() => null);
        seen.add(st ? st.size : -1);
        await new Promise((r) => setImmediate(r));
      }
    })();
    const out = await host.moveFiles([{ from: join(src, 'big.hs'), to: target }]);
    moving = false;
    await watcher;
    expect(out).toEqual([{ ok: true }]);
    expect(seen.has(-1)).toBe(true); // the watcher did look before the file arrived
    expect([...seen].filter((s) => s !== -1 && s !== size)).toEqual([]);
    expect((await stat(target)).size).toBe(size);
  });

  it('reports each move on its own: done when only the destination remains, failed otherwise, source kept on failure', async () => {
    const { src, dst } = await dirs('outcomes');
    await writeFile(join(src, 'a.hs'), content(1));
    await writeFile(join(dst, 'moved-before.hs'), content(2));
    await writeFile(join(src, 'c.hs'), content(3));
    const out = await host.moveFiles([
      { from: join(src, 'a.hs'), to: join(dst, 'a.hs') },
      { from: join(src, 'moved-before.hs'), to: join(dst, 'moved-before.hs') },
      { from: join(src, 'never.hs'), to: join(dst, 'never.hs') },
      { from: join(src, 'c.hs'), to: join(dst, 'no-such-dir', 'c.hs') },
    ]);
    expect(out[0]).toEqual({ ok: true });
    expect(out[1]).toEqual({ ok: true });
    expect(out[2]).toMatchObject({ ok: false, error: expect.stringMatching(/ENOENT/) });
    expect(out[3]).toMatchObject({ ok: false, error: expect.stringMatching(/ENOENT/) });
    expect(await readFile(join(src, 'c.hs'))).toEqual(content(3));
  });

  it('a copy that runs out of space fails, keeps the source and leaves nothing at the destination', async () => {
    const src = join(root, 'disk', 'full-src');
    await mkdir(src, { recursive: true });
    await writeFile(join(src, 'big.hs'), Buffer.alloc(3 << 20, 9));
    const out = await host.moveFiles([{ from: join(src, 'big.hs'), to: join(tiny.path, 'big.hs') }]);
    expect(out).toEqual([{ ok: false, error: expect.stringMatching(/ENOSPC/) }]);
    expect((await stat(join(src, 'big.hs'))).size).toBe(3 << 20);
    expect(await readdir(tiny.path)).toEqual([]);
  });
});
