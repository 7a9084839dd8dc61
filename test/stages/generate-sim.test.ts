/**
 * runGenerate against the SGLang simulator, a real child process in its own process group:
 * both input formats, resume after an abort, and the in-flight count the server sees.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { runGenerate, type GenerateJob } from '../../src/stages/generate/regenerate.js';
import { useLocalHost } from '../support/local-host.js';
import { startSim, stopSim, useSim, type Sim } from '../support/sim.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PROMPTS = join(ROOT, 'examples/data/prompts.jsonl');

const simulator = useSim();
let sim: Sim;
beforeAll(() => {
  ({ sim } = simulator);
});

const fx = useLocalHost('aerie-gensim-', { each: true });
let dir: string;
let host: LocalHost;
beforeEach(() => {
  ({ dir, host } = fx);
});

function job(over: Partial<GenerateJob>): GenerateJob {
  return {
    host,
    baseUrl: sim.baseUrl,
    model: 'sim-llama-8b',
    inputPath: PROMPTS,
    outDir: join(dir, 'out'),
    temperature: 0.7,
    maxTokens: 48,
    concurrency: 8,
    retries: 2,
    shardSize: 16,
    flushMs: 200,
    ...over,
  };
}

const readText = (p: string) => readFile(p, 'utf8');
const ids = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { id: string }).id);

describe('runGenerate against the simulator', () => {
  it('regenerates SpecForge and ShareGPT inputs alike, answers replacing the originals', async () => {
    const spec = await runGenerate(job({ numSamples: 24, outDir: join(dir, 'spec') }));
    expect(spec.counts).toEqual({ input: 24, ok: 24, error: 0, skipped: 0, rejected: 0 });

    const lines = (await readText(PROMPTS)).split('\n').filter(Boolean).slice(0, 24);
    const sharegpt = lines.map((l) => {
      const o = JSON.parse(l) as { id: string; conversations: { role: string; content: string }[] };
      const from = { user: 'human', assistant: 'gpt', system: 'system' } as Record<string, string>;
      return JSON.stringify({
        id: o.id,
        conversations: o.conversations.map((t) => ({ from: from[t.role], value: t.content })),
      });
    });
    await writeFile(join(dir, 'sharegpt.jsonl'), sharegpt.join('\n') + '\n');
    const sg = await runGenerate(job({ inputPath: join(dir, 'sharegpt.jsonl'), outDir: join(dir, 'sg') }));
    expect(sg.counts).toEqual(spec.counts);

    const specText = await readText(join(dir, 'spec', 'train.jsonl'));
    expect(await readText(join(dir, 'sg', 'train.jsonl'))).toBe(specText);
    const first = JSON.parse(specText.split('\n')[0]) as { conversations: { role: string; content: string }[] };
    const assistants = first.conversations.filter((t) => t.role === 'assistant');
    expect(assistants.length).toBeGreaterThan(0);
    for (const a of assistants) expect(a.content).not.toMatch(/^\(original/);
  }, 120_000);

  it('after an abort mid-run, the resume yields each id once and the same ok rows as an uninterrupted run', async () => {
    await runGenerate(job({ outDir: join(dir, 'full') }));
    const full = await readText(join(dir, 'full', 'train.jsonl'));

    const ctrl = new AbortController();
    await expect(
      runGenerate(job({ signal: ctrl.signal, onProgress: (p) => p.done >= 30 && ctrl.abort() })),
    ).rejects.toMatchObject({ name: 'AbortError' });
    const resumed = await runGenerate(job({}));
    expect(resumed.resumed).toBeGreaterThanOrEqual(30);
    expect(resumed.resumed).toBeLessThan(96);
    const text = await readText(join(dir, 'out', 'train.jsonl'));
    expect(new Set(ids(text)).size).toBe(96);
    expect(ids(text)).toHaveLength(96);
    expect(text).toBe(full);
    expect(resumed.counts.ok + resumed.counts.error + resumed.counts.skipped + resumed.counts.rejected).toBe(96);
  }, 180_000);

  it('keeps the target concurrency in flight: the server sees it running', async () => {
    // Its own simulator with slower decoding, so a request lasts long against the client's turnaround.
    const slow = await startSim({ AERIE_SIM_DECODE_SCALE: '0.5' });
    try {
      await runGenerate(job({ baseUrl: slow.baseUrl, concurrency: 6, maxTokens: 160, numSamples: 36 }));
    } finally {
      await stopSim(slow);
    }
    const running = [...slow.log().matchAll(/Decode batch\. #running-req: (\d+)/g)].map((m) => Number(m[1]));
    expect(running.length).toBeGreaterThan(10);
    expect(Math.max(...running)).toBe(6);
    // A pool (no batch barrier) holds the target through the run, not just at the start: ignoring
    // the drain at the end, the server runs close to 6 on average (a barrier would sag to the stragglers).
    const body = running.slice(0, Math.floor(running.length * 0.8));
    const mean = body.reduce((s, n) => s + n, 0) / body.length;
    expect(mean).toBeGreaterThan(0.8 * 6);
  }, 120_000);
});
