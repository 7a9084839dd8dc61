/**
 * runGenerate on a disk that fills up: a host whose writes under the output directory fail
 * with ENOSPC past a byte budget, the way the kernel fails them (an append writes what fits,
 * then fails). The fault matrix does the same on a real tmpfs through the whole workflow.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { beforeEach, describe, expect, it } from 'vitest';
import { generateFailure } from '../../src/activities/data.js';
import type { Host } from '../../src/hosts/host.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { DiskFullError, isNoSpace } from '../../src/stages/common/disk-full.js';
import { runGenerate, type GenerateJob } from '../../src/stages/generate/regenerate.js';
import { useFakeServer } from '../support/fake-server.js';
import { useLocalHost } from '../support/local-host.js';

let requests = 0;

const chat = useFakeServer((body, res) => {
  requests++;
  const msgs = (JSON.parse(body) as { messages: { content: string }[] }).messages;
  const last = msgs[msgs.length - 1]!.content;
  // Long enough answers that a shard is a few KiB: the budget cuts between shards.
  setTimeout(() => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({ choices: [{ message: { content: `answer(${msgs.length}):${last}:${'x'.repeat(200)}` } }] }),
    );
  }, 2);
});

const fx = useLocalHost('aerie-gen-full-', { each: true });
let dir: string;
let local: LocalHost;

beforeEach(async () => {
  ({ dir, host: local } = fx);
  requests = 0;
  const input = Array.from({ length: 40 }, (_, i) =>
    JSON.stringify({
      id: `d${i}`,
      conversations: [
        { role: 'user', content: `q${i}` },
        { role: 'assistant', content: 'old' },
      ],
    }),
  );
  await writeFile(join(dir, 'in.jsonl'), input.join('\n') + '\n');
});

async function bytesUnder(p: string): Promise<number> {
  let total = 0;
  for (const e of await readdir(p, { withFileTypes: true }).catch(() => [])) {
    const q = join(p, e.name);
    total += e.isDirectory() ? await bytesUnder(q) : (await stat(q)).size;
  }
  return total;
}

const enospc = () =>
  Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });

/** The local host, with a disk of `budget` bytes under root. */
function smallDisk(root: string, budget: number): { host: Host; free(): void } {
  let limit = budget;
  const under = (p: string) => p.startsWith(root + '/');
  const host = new Proxy(local, {
    get(target, prop, receiver) {
      if (prop === 'writeFileAtomic') {
        return async (path: string, data: string | Buffer) => {
          const n = Buffer.byteLength(data);
          // The real writeFileAtomic removes its temp file on failure: nothing is left.
          if (under(path) && (await bytesUnder(root)) + n > limit) throw enospc();
          return target.writeFileAtomic(path, data);
        };
      }
      if (prop === 'appendFile') {
        return async (path: string, data: string | Buffer) => {
          const buf = Buffer.from(data);
          const room = under(path) ? limit - (await bytesUnder(root)) : Infinity;
          if (buf.length <= room) return target.appendFile(path, buf);
          // A short write: what fits lands, then the call fails.
          if (room > 0) await target.appendFile(path, buf.subarray(0, room));
          throw enospc();
        };
      }
      if (prop === 'freeBytes')
        return async (path: string) =>
          under(path + '/') ? Math.max(0, limit - (await bytesUnder(root))) : target.freeBytes(path);
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as Host;
  return { host, free: () => (limit = Number.MAX_SAFE_INTEGER) };
}

function job(host: Host, outDir: string): GenerateJob {
  return {
    host,
    baseUrl: chat.baseUrl,
    model: 'm',
    inputPath: join(dir, 'in.jsonl'),
    outDir,
    temperature: 0,
    maxTokens: 16,
    concurrency: 4,
    retries: 0,
    shardSize: 4,
    flushMs: 50,
  };
}

const sha = async (p: string) =>
  createHash('sha256')
    .update(await readFile(p))
    .digest('hex');

/** Every shard on disk is exactly what an index line says aerie wrote; no temp file is left. */
async function checkShards(shardDir: string): Promise<number> {
  const names = await readdir(shardDir);
  expect(names.filter((n) => n.endsWith('.tmp') || n.includes('partial'))).toEqual([]);
  const index = new Map<string, string>();
  for (const line of (await readFile(join(shardDir, 'index.jsonl'), 'utf8')).split('\n')) {
    try {
      const e = JSON.parse(line) as { file: string; sha256: string };
      index.set(e.file, e.sha256);
    } catch {
      // the line a full disk cut short: its shard is not in the index
    }
  }
  let rows = 0;
  for (const n of names.filter((x) => /^ok-\d+\.jsonl$/.test(x))) {
    const text = await readFile(join(shardDir, n), 'utf8');
    if (index.has(n)) expect(await sha(join(shardDir, n))).toBe(index.get(n));
    // Whole rows only: every line parses and the file ends with a newline.
    expect(text.endsWith('\n')).toBe(true);
    for (const l of text.split('\n').filter(Boolean)) expect(JSON.parse(l)).toHaveProperty('status', 'success');
    rows += text.split('\n').filter(Boolean).length;
  }
  return rows;
}

describe('runGenerate when the disk fills up', () => {
  it('fails naming ENOSPC, the path and the free bytes; counts no partial shard; resumes to the same bytes once space is freed', async () => {
    const full = await runGenerate(job(local, join(dir, 'full')));
    const refShards = await bytesUnder(join(dir, 'full', 'shards'));
    const out = join(dir, 'out');
    const disk = smallDisk(out, Math.floor(refShards * 0.4));

    const err = await runGenerate(job(disk.host, out)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiskFullError);
    const e = err as DiskFullError;
    expect(e.message).toMatch(
      /no space left on device \(ENOSPC\) writing \S+\/out\/shards\/(ok-\d+|index)\.jsonl on local \(\d+ bytes\): .* \(\d+ bytes\) free there\. Fix: free space/,
    );
    expect(e.freeBytes).toBeLessThan(e.wantedBytes!);
    const saved = await checkShards(join(out, 'shards'));
    expect(saved).toBeGreaterThan(0);
    expect(saved).toBeLessThan(40);
    await expect(stat(join(out, 'train.jsonl'))).rejects.toThrow(/ENOENT/);

    // Still full: a retry fails before it asks the server for anything.
    const asked = requests;
    await expect(runGenerate(job(disk.host, out))).rejects.toBeInstanceOf(DiskFullError);
    expect(requests).toBe(asked);

    // A SIGKILLed attempt can leave a shard's temp file behind: it must not count or linger.
    await writeFile(
      join(out, 'shards', '.ok-000999.jsonl.1.abcd.tmp'),
      '{"id":"d0","conversations":[],"status":"ok"}\n{"id":"d1", "cut',
    );
    disk.free();
    const resumed = await runGenerate(job(disk.host, out));
    expect(resumed.resumed).toBe(saved);
    expect(requests - asked).toBe(40 - saved);
    expect(resumed.counts).toEqual(full.counts);
    expect(await readFile(join(out, 'train.jsonl'))).toEqual(await readFile(join(dir, 'full', 'train.jsonl')));
    // The index line the full disk cut short does not swallow the lines written after it.
    const lines = (await readFile(join(out, 'shards', 'index.jsonl'), 'utf8')).split('\n').filter(Boolean);
    const readable = lines.filter((l) => {
      try {
        return typeof (JSON.parse(l) as { file?: unknown }).file === 'string';
      } catch {
        return false;
      }
    });
    expect(readable.length).toBeGreaterThanOrEqual(lines.length - 1);
    await checkShards(join(out, 'shards'));
  });

  it('a full disk while merging leaves no partial train.jsonl; the resume writes it whole without asking again', async () => {
    await runGenerate(job(local, join(dir, 'full')));
    const refShards = await bytesUnder(join(dir, 'full', 'shards'));
    const out = join(dir, 'out');
    // Room for the shards and half of the merged copy.
    const disk = smallDisk(out, Math.floor(refShards * 1.5));
    const err = await runGenerate(job(disk.host, out)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiskFullError);
    expect((err as Error).message).toMatch(/writing \S+\/out\/train\.jsonl on local/);
    expect(
      (await readdir(out)).filter((n) => n.startsWith('.') || n === 'train.jsonl' || n === 'manifest.json'),
    ).toEqual([]);
    expect(await checkShards(join(out, 'shards'))).toBe(40);

    const asked = requests;
    disk.free();
    await runGenerate(job(disk.host, out));
    expect(requests).toBe(asked);
    expect(await readFile(join(out, 'train.jsonl'))).toEqual(await readFile(join(dir, 'full', 'train.jsonl')));
  });

  it('the activity retries a full disk (type DiskFull, retryable) and heartbeats "disk full"; other errors pass through', () => {
    const beats: Record<string, unknown>[] = [];
    const f = generateFailure(new DiskFullError('gpu', '/w/runs/r/data/shards/ok-000003.jsonl', 4096, 100), (d) =>
      beats.push(d),
    );
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect((f as ApplicationFailure).type).toBe('DiskFull');
    expect((f as ApplicationFailure).nonRetryable).toBe(false);
    expect((f as ApplicationFailure).message).toMatch(
      /no space left on device \(ENOSPC\) writing \/w\/runs\/r\/data\/shards\/ok-000003\.jsonl on gpu \(4096 bytes\): 100 B \(100 bytes\) free there/,
    );
    expect(beats).toEqual([
      { phase: 'disk full', path: '/w/runs/r/data/shards/ok-000003.jsonl', freeBytes: 100, wantedBytes: 4096 },
    ]);
    const other = new Error('boom');
    expect(generateFailure(other)).toBe(other);
  });

  it('recognises a full disk by code locally and by text over SSH', () => {
    expect(isNoSpace(enospc())).toBe(true);
    expect(isNoSpace(Object.assign(new Error('x'), { code: 'EDQUOT' }))).toBe(true);
    expect(isNoSpace(new Error('write /w/x on gpu failed (exit 1): cat: write error: No space left on device'))).toBe(
      true,
    );
    expect(isNoSpace(new Error('EACCES: permission denied'))).toBe(false);
  });
});
