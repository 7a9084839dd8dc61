/**
 * The generate pool's three steps (plan, batches, merge) against the SGLang simulator give
 * the one-server stage's outputs byte for byte, whatever order the batches run in and
 * however often one is cut short and resumed: the same rows, the same rejects, skips and
 * errors, each id once, in input order.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { combinePool, planPool, runBatch, runGenerate, type GenerateJob } from '../../src/stages/generate/index.js';
import { useLocalHost } from '../support/local-host.js';
import { useSim, type Sim } from '../support/sim.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PROMPTS = join(ROOT, 'examples/data/prompts.jsonl');
const OUTPUTS = ['train.jsonl', 'train_error.jsonl', 'train_skipped.jsonl', 'train_rejected.jsonl'];

const simulator = useSim();
let sim: Sim;
beforeAll(() => {
  ({ sim } = simulator);
});

const fx = useLocalHost('aerie-genpool-', { each: true });
let dir: string;
let host: LocalHost;
beforeEach(() => {
  ({ dir, host } = fx);
});

function job(input: string, outDir: string, over: Partial<GenerateJob> = {}): GenerateJob {
  return {
    host,
    baseUrl: sim.baseUrl,
    model: 'sim-llama-8b',
    inputPath: input,
    outDir,
    temperature: 0.7,
    maxTokens: 32,
    concurrency: 4,
    retries: 1,
    shardSize: 5,
    flushMs: 200,
    // Small reads, so batch ranges start and end inside read chunks.
    inputChunkBytes: 700,
    ...over,
  };
}

/** The demo prompts with every kind of line the plan must set aside: duplicates, junk, blanks, unanswerable, unsafe ids. */
async function messyInput(): Promise<string> {
  const lines = (await readFile(PROMPTS, 'utf8')).split('\n').filter(Boolean).slice(0, 40);
  const dup = lines[3]!;
  const noUser = JSON.stringify({ id: 'only-system', conversations: [{ role: 'system', content: 'be brief' }] });
  const unsafe = JSON.stringify({ id: '../escape', conversations: [{ role: 'user', content: 'hi' }] });
  const nonAscii = JSON.stringify({ id: 'ünï-çødé', conversations: [{ role: 'user', content: 'grüße, 世界' }] });
  const out = [...lines.slice(0, 10), dup, '', '{not json', noUser, ...lines.slice(10, 25), nonAscii, unsafe, dup];
  out.push('', ...lines.slice(25), lines[30]!);
  const path = join(dir, 'messy.jsonl');
  await writeFile(path, out.join('\r\n') + '\n');
  return path;
}

const read = (d: string, f: string) => readFile(join(d, f), 'utf8').catch(() => '');

async function poolRun(j: GenerateJob, batchSize: number, order: (n: number) => number[]) {
  const plan = await planPool(j, () => batchSize);
  let resumed = plan.resumed;
  for (const index of order(plan.batches)) resumed += (await runBatch(j, index)).resumed;
  return { plan, summary: await combinePool(j, resumed) };
}

describe('the generate pool', () => {
  it('gives the one-server outputs byte for byte, batches run in any order', async () => {
    const input = await messyInput();
    const ref = await runGenerate(job(input, join(dir, 'ref')));
    expect(ref.counts.rejected).toBe(4); // junk and three duplicates
    expect(ref.counts.skipped + ref.counts.error).toBeGreaterThanOrEqual(2);

    const { plan, summary } = await poolRun(job(input, join(dir, 'pool')), 7, (n) =>
      Array.from({ length: n }, (_, i) => (i * 5) % n),
    );
    expect(plan.batches).toBe(Math.ceil(plan.samples / 7));
    // Rejects, the unanswerable sample and the unsafe id are the plan's; every other line is a batch's.
    expect(plan.planned).toBe(6);
    expect(plan.samples + plan.planned).toBe(ref.counts.input);
    expect(summary.counts).toEqual(ref.counts);
    for (const f of OUTPUTS) expect(await read(join(dir, 'pool'), f), f).toBe(await read(join(dir, 'ref'), f));
  }, 180_000);

  it('a batch cut short and run again redoes only what was in flight; num-samples cuts the input as before', async () => {
    const input = await messyInput();
    await runGenerate(job(input, join(dir, 'ref'), { numSamples: 33 }));
    const j = job(input, join(dir, 'pool'), { numSamples: 33 });
    const plan = await planPool(j, () => 9);
    const ctrl = new AbortController();
    await expect(
      runBatch({ ...j, signal: ctrl.signal, onProgress: (p) => p.done >= 5 && ctrl.abort() }, 1),
    ).rejects.toMatchObject({ name: 'AbortError' });
    let resumed = 0;
    for (let i = plan.batches - 1; i >= 0; i--) resumed += (await runBatch(j, i)).resumed;
    expect(resumed).toBeGreaterThanOrEqual(5);
    expect(resumed).toBeLessThan(9);
    // The plan again (a resumed workflow plans first): the same batches, nothing recorded twice.
    const again = await planPool(j, () => 9);
    expect(again).toMatchObject({ batches: plan.batches, samples: plan.samples, planned: 0 });
    const summary = await combinePool(j, resumed);
    expect(summary.counts.input).toBe(33);
    for (const f of OUTPUTS) expect(await read(join(dir, 'pool'), f), f).toBe(await read(join(dir, 'ref'), f));
  }, 180_000);

  it('servers removed mid-stage: the one server goes on from what the pool finished, and the merge keeps it', async () => {
    const input = await messyInput();
    await runGenerate(job(input, join(dir, 'ref')));
    const j = job(input, join(dir, 'pool'));
    const plan = await planPool(j, () => 7);
    const b0 = await runBatch(j, 0);
    const b2 = await runBatch(j, 2);
    const one = await runGenerate(j);
    // The plan's own rows (in shards/) and both finished batches are not asked for again.
    expect(one.resumed).toBe(plan.planned + b0.samples + b2.samples);
    expect(one.counts.input).toBe(plan.samples + plan.planned);
    for (const f of OUTPUTS) expect(await read(join(dir, 'pool'), f), f).toBe(await read(join(dir, 'ref'), f));
  }, 180_000);

  it('servers added mid-stage: the pool regenerates only what the one server had not finished', async () => {
    const input = await messyInput();
    const ref = await runGenerate(job(input, join(dir, 'ref')));
    const j = job(input, join(dir, 'pool'));
    const ctrl = new AbortController();
    await expect(
      runGenerate({ ...j, signal: ctrl.signal, onProgress: (p) => p.done >= 12 && ctrl.abort() }),
    ).rejects.toThrow();
    const plan = await planPool(j, () => 7);
    expect(plan.resumed).toBeGreaterThanOrEqual(12);
    expect(plan.resumed + plan.samples + plan.planned).toBe(ref.counts.input);
    let regenerated = 0;
    for (let i = 0; i < plan.batches; i++) {
      const b = await runBatch(j, i);
      expect(b.resumed).toBe(0);
      regenerated += b.counts.ok + b.counts.error + b.counts.skipped;
    }
    expect(regenerated).toBe(plan.samples);
    const summary = await combinePool(j, plan.resumed);
    expect(summary.counts.input).toBe(ref.counts.input);
    for (const f of OUTPUTS) expect(await read(join(dir, 'pool'), f), f).toBe(await read(join(dir, 'ref'), f));
  }, 180_000);
});
