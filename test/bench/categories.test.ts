// Per-domain acceptance: a dataset with a category per prompt gives per-category accept
// lengths and speedup in the level records and a "Per category" section in the report.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { categoryFigures, mergeCategories } from '../../src/bench/categories.js';
import { levelCategories, levelPrompts, loadPromptPool, type PromptPool } from '../../src/bench/dataset.js';
import { renderReportMarkdown } from '../../src/bench/report.js';
import { aerieDriver } from '../../src/bench/sweep.js';
import type { RequestResult } from '../../src/bench/types.js';
import { SglangClient, avgSpecAcceptLength } from '../../src/sglang/client.js';
import { SimServer, simDrafter } from '../../bench/sim-process.js';
import { demoConfig } from '../support/demo-config.js';
import { useLocalHost } from '../support/local-host.js';

const FIXTURE = join(process.cwd(), 'test/fixtures/bench-categories/prompts.jsonl');

const req = (index: number, out: number, verify: number, e2e: number): RequestResult => ({
  index,
  sentAtMs: 0,
  ttftMs: 10,
  itlsMs: [],
  e2eMs: e2e,
  outputTokens: out,
  promptTokens: 5,
  acceptLength: out / verify,
  specVerifyCt: verify,
});

describe('category figures', () => {
  it('sums per category by prompt index, pooled and per-request accept length, TPOT', () => {
    const cats = ['code', 'chat', 'code', undefined];
    const f = categoryFigures([req(0, 40, 10, 410), req(1, 20, 10, 200), req(2, 10, 5, 100), req(3, 5, 5, 50)], cats)!;
    expect(f.map((c) => c.category)).toEqual(['(none)', 'chat', 'code']);
    const code = f.find((c) => c.category === 'code')!;
    expect(code.requests).toBe(2);
    expect(code.accept_length_pooled).toBe(50 / 15);
    expect(code.mean_accept_length_per_request).toBe((4 + 2) / 2);
    // TPOT: (410 − 10) / 39 and (100 − 10) / 9
    expect(code.mean_tpot_ms).toBeCloseTo((400 / 39 + 90 / 9) / 2, 12);
    expect(categoryFigures([req(0, 1, 1, 1)], [undefined])).toBeNull();
    const twice = mergeCategories([f, f])!;
    expect(twice.find((c) => c.category === 'code')).toMatchObject({ requests: 4, accept_length_pooled: 50 / 15 });
  });
});

describe('a dataset with categories, against the simulator', () => {
  // Registered first, so its afterAll removes the folder (the drafter in it) after the servers have stopped.
  const local = useLocalHost('aerie-categories-');
  let spec: SimServer;
  let base: SimServer;
  let pool: PromptPool;
  beforeAll(async () => {
    const config = demoConfig(local.dir, 1, (c) => {
      c.stages.benchmark.dataset = 'file';
      c.stages.benchmark['dataset-path'] = FIXTURE;
    });
    pool = await loadPromptPool(local.host, config, 2);
    const drafter = await simDrafter(3, local.dir);
    [spec, base] = await Promise.all([
      SimServer.start({
        decodeScale: 0,
        args: [
          '--speculative-algorithm',
          'EAGLE3',
          '--speculative-draft-model-path',
          drafter,
          '--speculative-num-steps',
          '3',
          '--speculative-eagle-topk',
          '1',
          '--speculative-num-draft-tokens',
          '4',
        ],
      }),
      SimServer.start({ decodeScale: 0 }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([spec?.stop(), base?.stop()]);
  });

  it('reads each row’s category, rotates it with its prompt per round, and breaks the report down by it', async () => {
    expect(pool.categories?.slice(0, 3)).toEqual(['writing', 'coding', 'math']);
    expect(pool.categories?.at(-1)).toBeUndefined();
    const n = 8;
    // Round 1 starts 8 rows on: prompt and category stay together.
    expect(levelPrompts(pool, n, 0, 1, 1)[0]).toBe(pool.prompts[8]);
    expect(levelCategories(pool, n, 1)![0]).toBe(pool.categories![8]);

    const measure = (s: SimServer, speculative: boolean) =>
      aerieDriver({
        baseUrl: s.baseUrl,
        api: 'generate',
        outputLen: 16,
        warmup: 0,
        control: new SglangClient(s.baseUrl),
        acceptLengthFrom: speculative ? avgSpecAcceptLength : undefined,
        meta: { backend: 'sglang', datasetName: 'sharegpt' },
      })({
        concurrency: 4,
        prompts: levelPrompts(pool, 13, 0, 1),
        categories: levelCategories(pool, 13),
        onProgress: () => undefined,
      });
    const [eagle, baseline] = await Promise.all([measure(spec, true), measure(base, false)]);
    const names = eagle.categories!.map((c) => c.category);
    expect(names).toEqual(['(none)', 'coding', 'math', 'reasoning', 'roleplay', 'writing']);
    expect(eagle.categories!.reduce((a, c) => a + c.requests, 0)).toBe(13);
    for (const c of eagle.categories!) expect(c.accept_length_pooled).toBeGreaterThan(1);
    expect(baseline.categories!.every((c) => c.accept_length_pooled === null)).toBe(true);

    const md = renderReportMarkdown({ title: 't', speculative: [eagle], baseline: [baseline] });
    const section = md.slice(md.indexOf('## Per category'));
    expect(section.split('\n')[2]).toBe(
      '| Concurrency | Category | Requests | Accept length (pooled) | Accept length (per-request mean) | Speedup (TPOT) |',
    );
    expect(section).toMatch(/\| 4 \| coding \| 3 \| \d\.\d\d \| \d\.\d\d \| \d+\.\d\d× \|/);
  });
});
