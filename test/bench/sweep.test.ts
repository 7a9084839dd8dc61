import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { overheadFigures } from '../../src/bench/overhead.js';
import { randomPrompts } from '../../src/bench/prompts.js';
import { benchServingRules } from '../../src/bench/bench-rules.js';
import {
  aerieDriver,
  flushWhenIdle,
  hostLevelStore,
  levelKey,
  runSweep,
  type LevelStore,
  type SweepProgress,
} from '../../src/bench/sweep.js';
import type { BenchServingRecord } from '../../src/bench/metrics.js';
import type { LevelRun } from '../../src/bench/types.js';
import { SglangClient, avgSpecAcceptLength } from '../../src/sglang/client.js';
import { SimServer, simDrafter } from '../../bench/sim-process.js';
import { useLocalHost } from '../support/local-host.js';
import { useTempDirs } from '../support/workdir.js';

const memoryStore = (
  initial: [number, BenchServingRecord, number?][] = [],
): LevelStore & { writes: number[]; roundWrites: string[] } => {
  const m = new Map(initial.map(([c, r, round]) => [`${c}:${round ?? 0}`, r]));
  const writes: number[] = [];
  const roundWrites: string[] = [];
  return {
    writes,
    roundWrites,
    read: async (c, round = 0) => m.get(`${c}:${round}`),
    write: async (c, r, round = 0) => {
      writes.push(c);
      roundWrites.push(`${c}:${round}`);
      m.set(`${c}:${round}`, r);
    },
  };
};

const fakeRecord = (c: number): BenchServingRecord =>
  ({
    max_concurrency: c,
    output_throughput: 10 * c,
    completed: c,
    errors: 0,
    accept_length: null,
    mean_accept_length_per_request: 2,
  }) as BenchServingRecord;

describe('runSweep', () => {
  const levels = useLocalHost('aerie-levels-');
  it('measures only the levels without a stored result, in order, and reports progress per level', async () => {
    const store = memoryStore([[2, fakeRecord(2)]]);
    const measured: number[] = [];
    const seen: SweepProgress[] = [];
    const records = await runSweep({
      variant: 'eagle3',
      concurrencies: [1, 2, 4],
      rounds: 1,
      promptsFor: (c) => Array.from({ length: c + 1 }, (_, i) => `p${i}`),
      store,
      measure: async (job) => {
        measured.push(job.concurrency);
        job.onProgress(1, job.prompts.length);
        return fakeRecord(job.concurrency);
      },
      onProgress: (p) => seen.push(p),
    });
    expect(records.map((r) => r.max_concurrency)).toEqual([1, 2, 4]);
    expect(measured).toEqual([1, 4]);
    expect(store.writes).toEqual([1, 4]);
    expect(seen.map((p) => [p.level, p.concurrency, p.done, p.total])).toEqual([
      [1, 1, 0, 2],
      [1, 1, 1, 2],
      [1, 1, 1, 1],
      [2, 2, 2, 2],
      [3, 4, 0, 5],
      [3, 4, 1, 5],
      [3, 4, 4, 4],
    ]);
    expect(seen.at(-1)!.finished.map((f) => [f.concurrency, f.stored])).toEqual([
      [1, false],
      [2, true],
      [4, false],
    ]);
    expect(seen.every((p) => p.levels === 3 && p.variant === 'eagle3')).toBe(true);
  });

  it('runs R rounds per level, resumes at the first missing round, and makes the level record from them', async () => {
    // Round 0 of level 3 survived an earlier attempt; rounds 1 and 2 are measured now.
    const store = memoryStore([[3, { ...fakeRecord(3), output_throughput: 50 }, 0]]);
    const jobs: string[] = [];
    const throughputs: Record<number, number> = { 1: 10, 2: 40 };
    const records = await runSweep({
      variant: 'baseline',
      concurrencies: [3],
      rounds: 3,
      promptsFor: (c, round) => [`c${c}r${round}`],
      categoriesFor: (_c, round) => [round === 1 ? 'code' : 'chat'],
      store,
      measure: async (job) => {
        jobs.push(`${job.prompts[0]}/${job.categories?.[0]}`);
        return { ...fakeRecord(3), output_throughput: throughputs[job.round!]! };
      },
    });
    expect(jobs).toEqual(['c3r1/code', 'c3r2/chat']);
    expect(store.roundWrites).toEqual(['3:1', '3:2']);
    const [level] = records;
    expect(level!.rounds!.map((r) => [r.round, r.output_throughput])).toEqual([
      [0, 50],
      [1, 10],
      [2, 40],
    ]);
    // The level's bench_serving keys are its median round's (40 tok/s of 10, 40, 50).
    expect(level!.output_throughput).toBe(40);
  });

  it('flushWhenIdle retries a refused flush, then gives up without failing the level', async () => {
    let calls = 0;
    expect(
      await flushWhenIdle(
        { flushCache: async () => (++calls < 3 ? Promise.reject(new Error('400')) : 'ok') },
        undefined,
        5,
        1,
      ),
    ).toBe(true);
    expect(calls).toBe(3);
    expect(await flushWhenIdle({ flushCache: async () => Promise.reject(new Error('400')) }, undefined, 2, 1)).toBe(
      false,
    );
  });

  it('stores levels on the host under a key of their settings', async () => {
    const { dir, host } = levels;
    const key = levelKey({ outputLen: 32, api: 'generate' });
    expect(key).toBe(levelKey({ outputLen: 32, api: 'generate' }));
    expect(key).not.toBe(levelKey({ outputLen: 64, api: 'generate' }));
    const store = hostLevelStore(host, dir, 'baseline', key);
    expect(await store.read(5)).toBeUndefined();
    await store.write(5, { ...fakeRecord(5), request_rate: Infinity });
    expect(await store.read(5)).toMatchObject({ max_concurrency: 5, request_rate: Infinity });
    expect(await hostLevelStore(host, dir, 'baseline', levelKey({ outputLen: 64 })).read(5)).toBeUndefined();
    await store.write(5, { ...fakeRecord(5), output_throughput: 1 }, 1);
    expect((await store.read(5, 1))!.output_throughput).toBe(1);
    expect((await readdir(join(dir, 'levels'))).sort()).toEqual([
      `baseline-c5-r0-${key}.json`,
      `baseline-c5-r1-${key}.json`,
    ]);
  });
});

describe('aerieDriver against the simulator', () => {
  // Registered first, so its afterAll removes the drafter after the server using it has stopped.
  const tmp = useTempDirs();
  let spec: SimServer;
  beforeAll(async () => {
    const drafter = tmp.track(await simDrafter(3));
    spec = await SimServer.start({
      decodeScale: 0,
      // a decode-log line every 2 steps, so the server's running accept length moves within a short level
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
        '--decode-log-interval',
        '2',
      ],
    });
  }, 60_000);
  afterAll(async () => {
    await spec?.stop();
  });

  it('reads the server version, flushes after the warmup, measures, then reads the server accept length for the level', async () => {
    const client = new SglangClient(spec.baseUrl);
    const order: string[] = [];
    const control = {
      flushCache: async (s?: AbortSignal) => (order.push('flush'), client.flushCache(s)),
      serverInfo: async (s?: AbortSignal) => (order.push('server_info'), client.serverInfo(s)),
    };
    const measure = aerieDriver({
      baseUrl: spec.baseUrl,
      api: 'generate',
      outputLen: 24,
      warmup: 1,
      control,
      acceptLengthFrom: avgSpecAcceptLength,
      meta: { backend: 'sglang', datasetName: 'random', randomInputLen: 8, randomOutputLen: 24 },
    });
    const r = await measure({
      concurrency: 4,
      prompts: randomPrompts(8, 8, 3),
      onProgress: () => order.push('request'),
    });
    // The version first (whose bench_serving rules the level follows), then the flush before any measured request.
    expect(order.slice(0, 2)).toEqual(['server_info', 'flush']);
    expect(order.filter((o) => o === 'request')).toHaveLength(8);
    expect(order.at(-1)).toBe('server_info');
    const version = (await client.serverInfo()).version;
    expect(r.bench_serving_rules).toBe(
      `bench_serving ${benchServingRules(String(version)).release} (server reports sglang ${String(version)})`,
    );
    expect(r.completed).toBe(8);
    expect(r.total_output_tokens).toBe(8 * 24);
    expect(r.mean_accept_length_per_request).toBeGreaterThan(1.5);
    expect(r.accept_length).toBeGreaterThan(1.5);
    expect(r.max_concurrency).toBe(4);
    // Both accept lengths: pooled from the summed counts, beside the per-request mean.
    expect(r.spec_requests).toBe(8);
    expect(r.spec_completion_tokens).toBe(8 * 24);
    expect(r.accept_length_pooled).toBeCloseTo(r.spec_completion_tokens! / r.spec_verify_steps!, 12);
    // The simulator's 0.5.23 reports the accepted-drafts histogram: one count per verify step.
    expect(r.spec_accept_histogram!.reduce((a, b) => a + b, 0)).toBe(r.spec_verify_steps);
    expect(r.accept_per_position![0]).toBeGreaterThan(0);
    // The server said it is the simulator.
    expect(r.server_simulated).toMatch(/^aerie-sim \d+\.\d+\.\d+$/);
  });

  it("chat: counts the level's raw prompts before the clock starts and sums them as bench_serving's total_input_tokens", async () => {
    const client = new SglangClient(spec.baseUrl);
    const order: string[] = [];
    const prompts = randomPrompts(6, 8, 4);
    const measure = aerieDriver({
      baseUrl: spec.baseUrl,
      api: 'chat',
      outputLen: 8,
      warmup: 1,
      control: {
        flushCache: (s?: AbortSignal) => (order.push('flush'), client.flushCache(s)),
        serverInfo: (s?: AbortSignal) => client.serverInfo(s),
      },
      countTokens: async (ps, special) => (
        order.push(special ? 'tokenize' : 'retokenize'),
        { lens: ps.map((p) => p.split(' ').length + (special ? 1 : 0)) }
      ),
      meta: { backend: 'sglang-oai-chat', datasetName: 'random' },
    });
    const r = await measure({ concurrency: 2, prompts, onProgress: () => order.push('request') });
    expect(order.slice(0, 2)).toEqual(['tokenize', 'flush']);
    expect(order.at(-1)).toBe('retokenize'); // after the last measured request
    expect(typeof r.total_output_tokens_retokenized).toBe('number');
    expect(r.completed).toBe(6);
    expect(r.total_input_tokens).toBe(6 * 9);
    // The server's count includes the chat template, so it is larger and kept apart.
    expect(r.total_input_tokens_server).toBeGreaterThan(r.total_input_tokens!);
    expect(r.chat_text_basis).not.toBeNull();
    expect(r.itl_per).not.toBeNull();
  });
});

describe('overheadFigures', () => {
  it('client E2E minus server e2e_latency per request, and bench_serving concurrency against the target', () => {
    const run: LevelRun = {
      concurrency: 2,
      durationMs: 100,
      startedAt: 't',
      maxInFlight: 2,
      warmup: [],
      results: [
        {
          index: 0,
          sentAtMs: 0,
          ttftMs: 1,
          itlsMs: [],
          e2eMs: 100,
          outputTokens: 10,
          promptTokens: 1,
          serverE2eMs: 99.5,
        },
        {
          index: 1,
          sentAtMs: 0,
          ttftMs: 1,
          itlsMs: [],
          e2eMs: 98,
          outputTokens: 10,
          promptTokens: 1,
          serverE2eMs: 98.2,
        },
        { index: 2, sentAtMs: 0, ttftMs: 1, itlsMs: [], e2eMs: 2, outputTokens: 0, promptTokens: 1, error: 'x' },
      ],
    };
    const f = overheadFigures(run);
    expect(f.failed).toBe(1);
    expect(f.overheadMs.count).toBe(2);
    expect(f.overheadMs.max).toBe(0.5);
    expect(f.overheadMs.mean).toBe(0.25); // the negative gap (clock noise) counts as 0
    expect(f.achievedConcurrency).toBeCloseTo(1.98, 12);
    expect(f.achievedRatio).toBeCloseTo(0.99, 12);
    expect(f.outputThroughput).toBe(200);
  });
});
