/**
 * DumpMover on real files through a LocalHost whose moveFiles calls are counted (the host
 * itself is real): batches form by size and by time, one goes at a time, a move counts only
 * at the expected size, and failures reach the right waiter.
 */
import { mkdir, mkdtemp, readdir, rm, truncate, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FileMove, MoveOutcome } from '../../src/hosts/host.js';
import { LocalHost } from '../../src/hosts/local.js';
import { DumpMover, sweepStagedMoves } from '../../src/stages/extract-mover.js';

let dir: string;
let local: LocalHost;
let calls: FileMove[][];
let concurrent: number;
let maxConcurrent: number;
/** When set, each moveFiles call waits for it (to hold a batch in flight). */
let gate: Promise<void> | null;

const host = {
  async moveFiles(moves: readonly FileMove[]): Promise<MoveOutcome[]> {
    calls.push([...moves]);
    concurrent++;
    maxConcurrent = Math.max(maxConcurrent, concurrent);
    try {
      if (gate) await gate;
      return await local.moveFiles(moves);
    } finally {
      concurrent--;
    }
  },
  stat: (p: string) => local.stat(p),
};

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aerie-mover-'));
  await mkdir(join(dir, 'shm'));
  await mkdir(join(dir, 'out'));
  local = new LocalHost({ name: 'local', workdir: dir });
  calls = [];
  concurrent = 0;
  maxConcurrent = 0;
  gate = null;
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function dump(name: string, bytes = 100): Promise<{ from: string; to: string; bytes: number }> {
  await writeFile(join(dir, 'shm', name), Buffer.alloc(bytes, 1));
  return { from: join(dir, 'shm', name), to: join(dir, 'out', name), bytes };
}

describe('DumpMover', () => {
  it('sends a full batch at once and the rest after the linger, one batch in flight at a time', async () => {
    const mover = new DumpMover(host, { maxBatch: 4, lingerMs: 300 });
    let release!: () => void;
    gate = new Promise((r) => (release = r));
    const moves = await Promise.all(Array.from({ length: 10 }, (_, i) => dump(`${i}.hs`)));
    const started = Date.now();
    const landed = moves.map((m) => mover.move(m));
    // The first 4 went at once; the next 4 make a full batch but must wait for the first.
    expect(calls.map((c) => c.length)).toEqual([4]);
    release();
    await Promise.all(landed.slice(0, 8));
    expect(calls.map((c) => c.length)).toEqual([4, 4]);
    // The last 2 are not a full batch: they go when the first of them has waited 300 ms.
    await Promise.all(landed);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(mover.batches).toEqual([4, 4, 2]);
    expect(maxConcurrent).toBe(1);
    expect((await readdir(join(dir, 'out'))).length).toBe(10);
    expect(await readdir(join(dir, 'shm'))).toEqual([]);
  });

  it('drain sends what is queued without waiting for the linger', async () => {
    const mover = new DumpMover(host, { maxBatch: 100, lingerMs: 60_000 });
    const landed = await Promise.all(['a', 'b', 'c'].map((n) => dump(n))).then((ms) => ms.map((m) => mover.move(m)));
    const started = Date.now();
    await mover.drain();
    await Promise.all(landed);
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(mover.batches).toEqual([3]);
    expect(mover.pending).toBe(0);
  });

  it('whenRoom waits while maxPending moves are queued or in flight', async () => {
    const mover = new DumpMover(host, { maxBatch: 2, maxPending: 2, lingerMs: 0 });
    let release!: () => void;
    gate = new Promise((r) => (release = r));
    const landed = [mover.move(await dump('a')), mover.move(await dump('b'))];
    let roomy = false;
    const room = mover.whenRoom().then(() => (roomy = true));
    await new Promise((r) => setImmediate(r));
    expect(roomy).toBe(false);
    release();
    await Promise.all(landed);
    await room;
    expect(roomy).toBe(true);
  });

  it('rejects only the failed moves with an OutputWriteError, and a wrong size counts as failed', async () => {
    const mover = new DumpMover(host, { maxBatch: 3, lingerMs: 0 });
    const good = await dump('good');
    const missing = { from: join(dir, 'shm', 'missing'), to: join(dir, 'out', 'missing'), bytes: 100 };
    const short = await dump('short');
    await truncate(short.from, 10);
    const results = await Promise.allSettled([mover.move(good), mover.move(missing), mover.move(short)]);
    expect(results[0]).toEqual({ status: 'fulfilled', value: undefined });
    expect(results[1]).toMatchObject({ status: 'rejected', reason: { name: 'OutputWriteError', message: expect.stringMatching(/moving .*missing.* failed: .*ENOENT/) } });
    expect(results[2]).toMatchObject({ status: 'rejected', reason: { name: 'OutputWriteError', message: expect.stringMatching(/has 10 bytes after the move, expected 100/) } });
  });
});

describe('sweepStagedMoves', () => {
  it('removes staging a killed move script left (an hour untouched) and keeps young staging and real dumps', async () => {
    const rows = join(dir, 'out', 'rows_0-2000');
    await mkdir(join(rows, '.aerie-mv.Ab12Cd'), { recursive: true });
    await writeFile(join(rows, '.aerie-mv.Ab12Cd', 's1.hs'), 'x'.repeat(4096));
    await writeFile(join(rows, '.s2.hs.4242.aerie-mv'), 'y');
    await mkdir(join(rows, '.aerie-mv.Young1'));
    await writeFile(join(rows, 's3.hs'), 'z');
    const old = new Date(Date.now() - 2 * 3600_000);
    for (const p of ['.aerie-mv.Ab12Cd', '.s2.hs.4242.aerie-mv', 's3.hs']) await utimes(join(rows, p), old, old);

    expect(await sweepStagedMoves(local, join(dir, 'out'))).toBe(2);
    expect((await readdir(rows)).sort()).toEqual(['.aerie-mv.Young1', 's3.hs']);
  });
});
