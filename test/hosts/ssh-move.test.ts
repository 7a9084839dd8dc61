/**
 * SshHost.moveFiles against a real OpenSSH server on loopback: SFTP rename within a
 * filesystem, the batch script across one (a tmpfs this test mounts) and with an exec
 * prefix (no SFTP), per-move outcomes, and a connection cut in the middle of a batch that
 * neither loses nor duplicates a file.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FileMove } from '../../src/hosts/host.js';
import type { SshHost } from '../../src/hosts/ssh.js';
import { chunkMoves, parseIntoDirOutput, parseMoveOutput, planMoves } from '../../src/hosts/ssh-move.js';
import { startSshFixture, type SshFixture } from '../support/ssh-fixture.js';
import { mountTmpfs, type Tmpfs } from '../support/tmpfs.js';
import { until } from './proc-helpers.js';

let fx: SshFixture;
let ram: Tmpfs;
let host: SshHost;
/** Every command and file operation through a prefix: the script path, as inside a container. */
let prefixed: SshHost;

beforeAll(async () => {
  fx = await startSshFixture();
  ram = await mountTmpfs(fx.dir, 512);
  host = fx.host();
  prefixed = fx.host({ name: 'gpu-prefixed', execPrefix: ['env'] });
});

afterAll(async () => {
  // sshd's sessions must be gone before the tmpfs can be unmounted: stop the fixture first.
  const tmpfs = ram;
  await fx?.stop().catch(() => undefined);
  await tmpfs?.unmount();
});

const content = (i: number, size = 4096) => Buffer.concat([Buffer.from(`file ${i}\n`), Buffer.alloc(size, i % 251)]);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function setUp(name: string, from: string, n: number, size = 4096): Promise<{ src: string; dst: string; moves: FileMove[] }> {
  const src = join(from, `${name}-src`);
  const dst = join(fx.dir, 'out', name);
  await mkdir(src, { recursive: true });
  await mkdir(dst, { recursive: true });
  const moves: FileMove[] = [];
  for (let i = 0; i < n; i++) {
    await writeFile(join(src, `${i}.hs`), content(i, size));
    moves.push({ from: join(src, `${i}.hs`), to: join(dst, `${i}.hs`) });
  }
  return { src, dst, moves };
}

async function expectLanded(src: string, dst: string, n: number, size = 4096): Promise<void> {
  expect(await readdir(src)).toEqual([]);
  expect((await readdir(dst)).sort()).toEqual(Array.from({ length: n }, (_, i) => `${i}.hs`).sort());
  for (let i = 0; i < n; i++) expect(sha(await readFile(join(dst, `${i}.hs`)))).toBe(sha(content(i, size)));
}

describe('move script helpers', () => {
  it('cuts batches below the argument limit, keeping order and every move', () => {
    const moves = Array.from({ length: 500 }, (_, i) => ({ from: `/dev/shm/x/${i}.hs`, to: `/data/out/rows_0-2000/${i}.hs` }));
    const chunks = chunkMoves(moves, 10_000);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.flat()).toEqual(moves);
    for (const c of chunks) expect(c.reduce((s, m) => s + 4 * (m.from.length + m.to.length) + 8, 0)).toBeLessThanOrEqual(10_000);
    expect(chunkMoves([{ from: 'a'.repeat(20_000), to: 'b' }], 10_000)).toHaveLength(1);
  });

  it('groups moves that keep their names in one directory, and sends the rest alone', () => {
    const m = (from: string, to: string) => ({ from, to });
    const plan = planMoves([
      m('/shm/a.hs', '/out/r0/a.hs'),
      m('/shm/b.hs', '/out/r0/b.hs'),
      m('/shm/c.hs', '/out/r1/c.hs'), // alone in its directory
      m('/shm/d.hs', '/out/r0/renamed.hs'), // a new name
      m('/shm/.e.hs', '/out/r0/.e.hs'), // hidden: the script's glob would miss it
      m('/other/a.hs', '/out/r0/a.hs'), // a second a.hs for the same directory
      m('/shm/f.hs', '/out/r0/f.hs'),
    ]);
    expect(plan).toEqual({ groups: [{ dir: '/out/r0', items: [0, 1, 6] }], singles: [2, 3, 4, 5] });
    expect(parseIntoDirOutput('ok\nretry\n', 2)).toEqual([true, false]);
    expect(() => parseIntoDirOutput('ok\n', 2)).toThrow();
  });

  it('reads one outcome per move and refuses a short or garbled report', () => {
    expect(parseMoveOutput('ok\nerr disk full\n', 2)).toEqual([{ ok: true }, { ok: false, error: 'disk full' }]);
    expect(() => parseMoveOutput('ok\n', 2)).toThrow(/1 results for 2 moves/);
    expect(() => parseMoveOutput('ok\nmaybe\n', 2)).toThrow(/unexpected/);
  });
});

describe('SshHost.moveFiles', () => {
  it('renames within a filesystem over SFTP, running no command on the host', async () => {
    const { src, dst, moves } = await setUp('same', join(fx.dir, 'disk'), 20);
    // Count the command channels opened on the live connection (the real one, only observed).
    const conn = await host.link.conn();
    const run = conn.run.bind(conn);
    let commands = 0;
    conn.run = (...args) => {
      commands++;
      return run(...args);
    };
    try {
      const out = await host.moveFiles(moves);
      expect(out.every((o) => o.ok)).toBe(true);
    } finally {
      conn.run = run;
    }
    expect(commands).toBe(0);
    await expectLanded(src, dst, 20);
  });

  it('copies across filesystems in one script run: whole files, sources gone, no temp files left', async () => {
    const { src, dst, moves } = await setUp('across', ram.path, 30, 200_000);
    expect((await stat(src)).dev).not.toBe((await stat(dst)).dev);
    const out = await host.moveFiles(moves);
    expect(out.every((o) => o.ok)).toBe(true);
    await expectLanded(src, dst, 30, 200_000);
  });

  it('with an exec prefix (no SFTP) moves within and across filesystems through the script', async () => {
    const a = await setUp('prefixed-same', join(fx.dir, 'disk'), 5);
    const b = await setUp('prefixed-across', ram.path, 5);
    const out = await prefixed.moveFiles([...a.moves, ...b.moves]);
    expect(out.every((o) => o.ok)).toBe(true);
    await expectLanded(a.src, a.dst, 5);
    await expectLanded(b.src, b.dst, 5);
  });

  it.each([
    ['SFTP first', () => host],
    ['script only', () => prefixed],
  ])('reports each move on its own (%s), keeping the source of a failed one', async (_name, pick) => {
    const { src, dst, moves } = await setUp(`outcomes-${_name.replace(/\W/g, '')}`, ram.path, 2);
    await writeFile(join(dst, 'moved-before.hs'), 'x');
    const out = await pick().moveFiles([
      moves[0]!,
      { from: join(src, 'moved-before.hs'), to: join(dst, 'moved-before.hs') },
      { from: join(src, 'never.hs'), to: join(dst, 'never.hs') },
      { from: moves[1]!.from, to: join(dst, 'no-such-dir', '1.hs') },
    ]);
    expect(out[0]).toEqual({ ok: true });
    expect(out[1]).toEqual({ ok: true });
    expect(out[2]).toMatchObject({ ok: false, error: expect.stringMatching(/no such file/i) });
    expect(out[3]).toMatchObject({ ok: false, error: expect.stringMatching(/no such file/i) });
    expect(await readFile(moves[1]!.from)).toEqual(content(1));
    expect((await readdir(dst)).sort()).toEqual(['0.hs', 'moved-before.hs']);
  });

  it('a connection cut in the middle of a batch neither loses nor duplicates a file', async () => {
    const n = 48;
    const size = 4 << 20;
    const { src, dst, moves } = await setUp('cut', ram.path, n, size);
    await host.stat(fx.dir);
    const drops = host.link.stats.drops;
    const moving = host.moveFiles(moves);
    // Cut while the batch is copying: its staging directory holds some files, none has landed.
    await until('the batch to start copying', async () => {
      const staged = (await readdir(dst)).filter((f) => f.startsWith('.aerie-mv.'));
      for (const s of staged) if ((await readdir(join(dst, s)).catch(() => [])).length > 0) return true;
      return null;
    }, 60_000);
    const landed = (await readdir(dst)).filter((f) => !f.startsWith('.')).length;
    expect((await fx.sshd.dropConnections()).length).toBeGreaterThan(0);
    expect(landed).toBeLessThan(n);
    const out = await moving;
    expect(out).toEqual(moves.map(() => ({ ok: true })));
    expect(host.link.stats.drops).toBeGreaterThan(drops);
    // The cut run may still be finishing its current file beside the re-run; wait until
    // its staged copy is gone too, then every file is there once, whole, and no source is left.
    await until('no staged copies in the destination', async () => (await readdir(dst)).every((f) => !f.startsWith('.')), 60_000);
    await expectLanded(src, dst, n, size);
  }, 120_000);
});
