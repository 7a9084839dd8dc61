/**
 * runExtract against a small in-process stand-in for the patched server, whose dumps the
 * test can truncate or withhold: verification, retries, moves, resume, refusal on space.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { waitUntil } from '../support/temporal.js';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LocalHost } from '../../src/hosts/local.js';
import { runExtract, type ExtractJob } from '../../src/stages/extract.js';
import { mountTmpfs } from '../support/tmpfs.js';

const H = 16;
let server: Server;
let baseUrl: string;
let dumpDir: string;
/** rid → how many more times to dump short (Infinity = always). */
let shortDumps: Map<string, number>;
let missingDumps: Set<string>;
let rids: string[];
/** Dumps the stand-in has yet to write: an aborted run's late dumps land before the next run starts. */
let pendingDumps = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const { text, rid } = JSON.parse(body) as { text: string; rid: string };
      rids.push(rid);
      const tokens = text.split(/\s+/).filter(Boolean).length + 1;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ text: '', meta_info: { id: rid, prompt_tokens: tokens, completion_tokens: 0 } }));
      // The real server dumps around the time it answers; write a little later to exercise the poll.
      const left = shortDumps.get(rid) ?? 0;
      if (missingDumps.has(rid)) return;
      if (left > 0) shortDumps.set(rid, left - 1);
      const size = tokens * 3 * H * 2 - (left > 0 ? 7 : 0);
      pendingDumps++;
      setTimeout(() => void writeFile(join(dumpDir, `${rid}.hs`), Buffer.alloc(size, 1)).finally(() => pendingDumps--), 15);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

let dir: string;
let host: LocalHost;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aerie-ext-'));
  dumpDir = join(dir, 'shm');
  await mkdir(dumpDir);
  host = new LocalHost({ name: 'local', workdir: dir });
  shortDumps = new Map();
  missingDumps = new Set();
  rids = [];
});

afterEach(async () => {
  await host.close();
  await rm(dir, { recursive: true, force: true });
});

const sample = (id: string, q: string) =>
  JSON.stringify({ id, conversations: [{ role: 'user', content: q }, { role: 'assistant', content: `answer to ${q}` }], status: 'ok' });

function job(over: Partial<ExtractJob> = {}): ExtractJob {
  return {
    host,
    baseUrl,
    samplesPath: join(dir, 'train.jsonl'),
    dumpDir,
    outDir: join(dir, 'hs'),
    hiddenSize: H,
    concurrency: 3,
    dumpWaitMs: 400,
    indexBatch: 2,
    flushMs: 50,
    ...over,
  };
}

async function writeSamples(n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `s${i}`);
  await writeFile(join(dir, 'train.jsonl'), ids.map((id, i) => sample(id, 'word '.repeat(i + 1))).join('\n') + '\n');
  return ids;
}

describe('runExtract with a stand-in patched server', () => {
  it('verifies each dump, moves it into rows_0-2000/<id>.hs, and leaves the dump dir empty', async () => {
    const ids = await writeSamples(6);
    const summary = await runExtract(job());
    expect(summary.counts).toEqual({ input: 6, ok: 6, error: 0, resumed: 0 });
    expect(await readdir(dumpDir)).toEqual([]);
    const files = (await readdir(join(dir, 'hs', 'rows_0-2000'))).sort();
    expect(files).toEqual(ids.map((id) => `${id}.hs`).sort());
    const index = (await readFile(join(dir, 'hs', 'index.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(index.map((e: { id: string }) => e.id)).toEqual(ids);
    for (const e of index) {
      expect((await stat(join(dir, 'hs', e.file))).size).toBe(e.tokens * 3 * H * 2);
    }
    expect(summary.totalBytes).toBe(index.reduce((s: number, e: { bytes: number }) => s + e.bytes, 0));
    const manifest = JSON.parse(await readFile(join(dir, 'hs', 'manifest.json'), 'utf8'));
    expect(manifest).toMatchObject({ counts: summary.counts, totalBytes: summary.totalBytes, hiddenSize: H });
  });

  it('retries a short dump, records dumps that stay short or never come as errors', async () => {
    await writeSamples(4);
    shortDumps.set('s0', 1);
    shortDumps.set('s1', Infinity);
    missingDumps.add('s2');
    const summary = await runExtract(job({ retries: 2 }));
    expect(summary.counts).toMatchObject({ input: 4, ok: 2, error: 2 });
    expect(rids.filter((r) => r === 's0')).toHaveLength(2);
    expect(rids.filter((r) => r === 's1')).toHaveLength(3);
    const errors = (await readFile(join(dir, 'hs', 'extract_error.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(errors.map((e: { id: string; error: string }) => [e.id, e.error])).toEqual([
      ['s1', expect.stringMatching(/^bad dump: .* has \d+ bytes after 400 ms, expected \d+/)],
      ['s2', expect.stringMatching(/^bad dump: no dump at/)],
    ]);
    expect(await readdir(dumpDir)).toEqual([]);
  });

  it('resumes by id: skips verified files, redoes a truncated and a deleted one', async () => {
    await writeSamples(8);
    await runExtract(job());
    await truncate(join(dir, 'hs', 'rows_0-2000', 's3.hs'), 10);
    await rm(join(dir, 'hs', 'rows_0-2000', 's5.hs'));
    rids = [];
    const summary = await runExtract(job());
    expect(rids.sort()).toEqual(['s3', 's5']);
    expect(summary.counts).toEqual({ input: 8, ok: 8, error: 0, resumed: 6 });
    // The stand-in counts words + 1 as tokens: <|user|>, 4 words, <|assistant|>, "answer to", 4 words.
    const size = (await stat(join(dir, 'hs', 'rows_0-2000', 's3.hs'))).size;
    expect(size).toBe(13 * 3 * H * 2);
  });

  it('resumes after an abort mid-run and clears what the aborted run left in the dump dir', async () => {
    await writeSamples(12);
    const ctrl = new AbortController();
    await expect(
      runExtract(job({ signal: ctrl.signal, concurrency: 2, moveLingerMs: 0, onProgress: (p) => p.ok >= 4 && ctrl.abort() })),
    ).rejects.toMatchObject({ name: 'AbortError' });
    // The abandoned prefills' own dumps land first (a real server writes them too).
    await waitUntil(async () => pendingDumps === 0, 'the stand-in to finish its dumps', 10_000, 10);
    // A leftover dump of an unfinished sample, as if the server wrote it after the abort.
    await writeFile(join(dumpDir, 's11.hs'), Buffer.alloc(5));
    const summary = await runExtract(job());
    expect(summary.counts.ok).toBe(12);
    expect(summary.counts.resumed).toBeGreaterThanOrEqual(4);
    expect(await readdir(dumpDir)).toEqual([]);
  });

  it('refuses to start when the destination cannot hold the estimate, naming needed and free bytes', async () => {
    await writeSamples(3);
    await expect(runExtract(job({ hiddenSize: 2 ** 45 }))).rejects.toMatchObject({
      name: 'InsufficientSpaceError',
      message: expect.stringMatching(/extract needs about .* \(\d+ bytes: 3 samples, ~\d+ tokens × 8 × hidden \d+\) .* but only .* \(\d+ bytes\) are free/),
    });
    expect(rids).toEqual([]);
  });

  it('counts unsafe and duplicate ids as errors and writes nothing outside outDir', async () => {
    await writeFile(
      join(dir, 'train.jsonl'),
      [sample('ok1', 'a'), sample('../escape', 'b'), sample('ok1', 'c'), sample('sub/dir', 'd')].join('\n'),
    );
    const summary = await runExtract(job());
    expect(summary.counts).toEqual({ input: 4, ok: 1, error: 3, resumed: 0 });
    expect(rids).toEqual(['ok1']);
    expect((await readdir(dir)).sort()).toEqual(['hs', 'shm', 'train.jsonl']);
  });
  it('stops with an output error when the output disk fills mid-run, leaving no dump behind, and resumes', async () => {
    const ids = await writeSamples(10);
    const disk = await mountTmpfs(dir, 4);
    try {
      const outDir = join(disk.path, 'hs');
      let filled = false;
      const fill = async (): Promise<void> => {
        // Take every free byte once the first samples have landed: the next moves cannot.
        filled = true;
        await writeFile(join(disk.path, 'filler'), Buffer.alloc(8 << 20)).catch(() => undefined);
      };
      let filling: Promise<void> | null = null;
      await expect(
        runExtract(job({ outDir, concurrency: 1, moveLingerMs: 0, onProgress: (p) => void (p.ok >= 2 && !filled && (filling = fill())) })),
      ).rejects.toMatchObject({ name: 'OutputWriteError', message: expect.stringMatching(/No space left|ENOSPC/i) });
      await filling;
      expect(await readdir(dumpDir)).toEqual([]);
      // Whatever landed is whole; nothing half-copied sits beside it.
      const landed = await readdir(join(outDir, 'rows_0-2000'));
      expect(landed.every((f) => /^s\d+\.hs$/.test(f))).toBe(true);
      await rm(join(disk.path, 'filler'));
      const summary = await runExtract(job({ outDir }));
      expect(summary.counts).toMatchObject({ input: 10, ok: 10, error: 0 });
      expect((await readdir(join(outDir, 'rows_0-2000'))).sort()).toEqual(ids.map((id) => `${id}.hs`).sort());
      expect(await readdir(dumpDir)).toEqual([]);
    } finally {
      await disk.unmount();
    }
  });
});
