/**
 * runGenerate against a small in-process chat server whose faults the test controls:
 * malformed input, retries, per-sample errors, an unreachable server, a lost shard, abort.
 */
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { Host } from '../../src/hosts/host.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { runGenerate, type GenerateJob } from '../../src/stages/generate/regenerate.js';
import { useFakeServer } from '../support/fake-server.js';
import { useLocalHost } from '../support/local-host.js';

interface Behaviour {
  delayMs: number;
  /** Prompt text → how many times to answer 500 before succeeding. */
  flaky: Map<string, number>;
  /** Prompts always answered 400. */
  poison: Set<string>;
}

let behaviour: Behaviour;
let inFlight = 0;
let maxInFlight = 0;
let requests = 0;

const chat = useFakeServer((body, res) => {
  requests++;
  inFlight++;
  maxInFlight = Math.max(maxInFlight, inFlight);
  const msgs = (JSON.parse(body) as { messages: { role: string; content: string }[] }).messages;
  const last = msgs[msgs.length - 1].content;
  setTimeout(() => {
    inFlight--;
    const left = behaviour.flaky.get(last) ?? 0;
    if (behaviour.poison.has(last)) {
      res.writeHead(400, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ error: { message: 'poisoned prompt' } }));
    }
    if (left > 0) {
      behaviour.flaky.set(last, left - 1);
      res.writeHead(500);
      return res.end('transient');
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({ choices: [{ message: { role: 'assistant', content: `answer(${msgs.length}):${last}` } }] }),
    );
  }, behaviour.delayMs);
});

const fx = useLocalHost('aerie-gen-', { each: true });
let dir: string;
let host: LocalHost;

beforeEach(async () => {
  ({ dir, host } = fx);
  behaviour = { delayMs: 2, flaky: new Map(), poison: new Set() };
  inFlight = 0;
  maxInFlight = 0;
  requests = 0;
});

const sf = (id: string, ...qs: string[]) =>
  JSON.stringify({
    id,
    conversations: qs.flatMap((q) => [
      { role: 'user', content: q },
      { role: 'assistant', content: 'old' },
    ]),
  });

function job(over: Partial<GenerateJob> = {}): GenerateJob {
  return {
    host,
    baseUrl: chat.baseUrl,
    model: 'm',
    inputPath: join(dir, 'in.jsonl'),
    outDir: join(dir, 'out'),
    temperature: 0,
    maxTokens: 16,
    concurrency: 4,
    retries: 2,
    shardSize: 3,
    flushMs: 50,
    ...over,
  };
}

async function rows(name: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(join(dir, 'out', name), 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('runGenerate with a controllable server', () => {
  it('rejects malformed lines with 1-based line numbers and still finishes, ShareGPT and SpecForge alike', async () => {
    const lines = [
      sf('s1', 'q1', 'q1b'),
      '{"id": "broken", ',
      '',
      JSON.stringify({
        id: 'g1',
        conversations: [
          { from: 'human', value: 'gq' },
          { from: 'gpt', value: 'old' },
        ],
      }),
      JSON.stringify({ id: 'nouser', conversations: [{ role: 'system', content: 's' }] }),
      JSON.stringify({ conversations: [] }),
      sf('s1', 'dup'),
      JSON.stringify({ id: 'x', conversations: [{ from: 'robot', value: 'r' }] }),
      sf('../up', 'q'),
    ];
    await writeFile(join(dir, 'in.jsonl'), lines.join('\n') + '\n');
    const summary = await runGenerate(job());
    expect(summary.counts).toEqual({ input: 8, ok: 2, error: 1, skipped: 1, rejected: 4 });
    const ok = await rows('train.jsonl');
    expect(ok.map((r) => r.id)).toEqual(['s1', 'g1']);
    expect(ok[0].conversations).toEqual([
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: 'answer(1):q1' },
      { role: 'user', content: 'q1b' },
      { role: 'assistant', content: 'answer(3):q1b' },
    ]);
    expect(ok[1]).toEqual({
      id: 'g1',
      status: 'success',
      conversations: [
        { role: 'user', content: 'gq' },
        { role: 'assistant', content: 'answer(1):gq' },
      ],
    });
    const rejected = await rows('train_rejected.jsonl');
    expect(rejected.map((r) => [r.line, r.reason])).toEqual([
      [2, expect.stringMatching(/^bad JSON/)],
      [6, 'no id'],
      [7, 'duplicate id'],
      [8, 'turn 1: unknown role "robot"'],
    ]);
    expect((await rows('train_skipped.jsonl')).map((r) => [r.id, r.status, r.error, r.reason])).toEqual([
      ['nouser', 'skipped', 'no user turn', undefined],
    ]);
    expect((await rows('train_error.jsonl')).map((r) => [r.id, r.error])).toEqual([
      ['../up', 'unsafe id: contains a path separator'],
    ]);
    const manifest = JSON.parse(await readFile(join(dir, 'out', 'manifest.json'), 'utf8'));
    expect(manifest.counts).toEqual(summary.counts);
    expect(manifest.files.map((f: { path: string; rows: number }) => [f.path.split('/').pop(), f.rows])).toEqual([
      ['train.jsonl', 2],
      ['train_error.jsonl', 1],
      ['train_skipped.jsonl', 1],
      ['train_rejected.jsonl', 4],
    ]);
  });

  it('retries transient failures, then records a persistent failure as an error row with the message', async () => {
    await writeFile(join(dir, 'in.jsonl'), [sf('a', 'flaky'), sf('b', 'poison'), sf('c', 'fine')].join('\n'));
    behaviour.flaky.set('flaky', 2);
    behaviour.poison.add('poison');
    const summary = await runGenerate(job({ retries: 2 }));
    expect(summary.counts).toMatchObject({ ok: 2, error: 1 });
    expect((await rows('train_error.jsonl')).map((r) => [r.id, r.error])).toEqual([['b', 'HTTP 400: poisoned prompt']]);
    // flaky: 2 failures + 1 success; poison: 1 + 2 retries; fine: 1.
    expect(requests).toBe(7);
  });

  it('stops without recording rows when the server is unreachable, and a resume completes the run', async () => {
    await writeFile(join(dir, 'in.jsonl'), Array.from({ length: 6 }, (_, i) => sf(`u${i}`, `q${i}`)).join('\n'));
    await expect(runGenerate(job({ baseUrl: 'http://127.0.0.1:1', retries: 0 }))).rejects.toMatchObject({
      name: 'ServerUnreachableError',
    });
    const summary = await runGenerate(job());
    expect(summary.counts).toEqual({ input: 6, ok: 6, error: 0, skipped: 0, rejected: 0 });
    expect(requests).toBe(6);
  });

  it('keeps `concurrency` requests in flight', async () => {
    await writeFile(join(dir, 'in.jsonl'), Array.from({ length: 40 }, (_, i) => sf(`c${i}`, `q${i}`)).join('\n'));
    behaviour.delayMs = 20;
    await runGenerate(job({ concurrency: 8 }));
    expect(maxInFlight).toBe(8);
  });

  it('resumes after an abort: every id exactly once, same rows as an uninterrupted run', async () => {
    const input = Array.from({ length: 30 }, (_, i) => sf(`r${i}`, `q${i}`, `f${i}`)).join('\n');
    await writeFile(join(dir, 'in.jsonl'), input);
    behaviour.delayMs = 5;
    const full = await runGenerate(job({ outDir: join(dir, 'full') }));
    const fullText = await readFile(join(dir, 'full', 'train.jsonl'), 'utf8');

    const ctrl = new AbortController();
    const partial = runGenerate(job({ signal: ctrl.signal, onProgress: (p) => p.ok >= 10 && ctrl.abort() }));
    await expect(partial).rejects.toMatchObject({ name: 'AbortError' });
    const shards = await readdir(join(dir, 'out', 'shards'));
    expect(shards.some((n) => n.startsWith('ok-'))).toBe(true);
    const requestsBefore = requests;
    const resumed = await runGenerate(job());
    expect(resumed.resumed).toBeGreaterThanOrEqual(10);
    expect(resumed.resumed).toBeLessThan(30);
    // Only the unfinished samples were asked again (two turns each).
    expect(requests - requestsBefore).toBe((30 - resumed.resumed) * 2);
    expect(resumed.counts).toEqual(full.counts);
    expect(await readFile(join(dir, 'out', 'train.jsonl'), 'utf8')).toBe(fullText);
  });

  it('refuses to call the stage complete when a shard went missing (the count check)', async () => {
    await writeFile(join(dir, 'in.jsonl'), Array.from({ length: 5 }, (_, i) => sf(`k${i}`, `q${i}`)).join('\n'));
    let dropped = false;
    // A host that silently loses the first ok shard, like a write lost to a failing disk.
    const lossy: Host = new Proxy(host, {
      get(target, prop, receiver) {
        if (prop === 'writeFileAtomic') {
          return async (path: string, data: string | Buffer) => {
            if (!dropped && /\/ok-\d+\.jsonl$/.test(path)) {
              dropped = true;
              return;
            }
            return target.writeFileAtomic(path, data);
          };
        }
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    await expect(runGenerate(job({ host: lossy, shardSize: 2 }))).rejects.toThrow(
      /generate incomplete: ok \d \+ error 0 \+ skipped 0 \+ rejected 0 = \d, but the input has 5 lines; missing lines/,
    );
    // The next run redoes exactly the lost rows and completes.
    const summary = await runGenerate(job());
    expect(summary.counts.ok).toBe(5);
  });

  it('refuses to resume over a different input', async () => {
    await writeFile(join(dir, 'in.jsonl'), sf('a', 'q'));
    await runGenerate(job());
    await writeFile(join(dir, 'in.jsonl'), sf('a', 'changed'));
    await expect(runGenerate(job())).rejects.toThrow(/changed since the partial run/);
  });
});
