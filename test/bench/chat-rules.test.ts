// bench_serving's chat timing per release (src/bench/bench-rules.ts), reasoning reported
// beside TTFT/ITL, and input tokens counted as bench_serving counts them (S4, S5).
import { describe, expect, it } from 'vitest';
import { benchServingRules, rulesLabel, serverVersionOf } from '../../src/bench/bench-rules.js';
import { summarizeLevel } from '../../src/bench/metrics.js';
import { finishTally, newTally, tallyEvent } from '../../src/bench/tally.js';
import { tokenizePrompts } from '../../src/bench/tokenize.js';
import type { LevelRun, RequestResult } from '../../src/bench/types.js';
import { useFakeServer } from '../support/fake-server.js';

const DONE = { data: '[DONE]' };
const chunk = (delta: Record<string, string>, usage?: Record<string, unknown>) => ({
  data: JSON.stringify({ choices: [{ index: 0, delta }], ...(usage ? { usage } : {}) }),
});
const usageOnly = (usage: Record<string, unknown>) => ({ data: JSON.stringify({ choices: [], usage }) });

describe('benchServingRules: the chat rules of the release the server reports', () => {
  it('content only and one ITL per chunk on 0.5.4; the speculative split from 0.5.9; reasoning counts from 0.5.12', () => {
    expect(benchServingRules('0.5.4')).toMatchObject({
      release: '0.5.4',
      chatReasoningIsText: false,
      chatSplitsSpeculativeChunks: false,
    });
    expect(benchServingRules('0.5.9')).toMatchObject({
      release: '0.5.9',
      chatReasoningIsText: false,
      chatSplitsSpeculativeChunks: true,
    });
    expect(benchServingRules('0.5.11')).toMatchObject({ release: '0.5.9', chatReasoningIsText: false });
    expect(benchServingRules('0.5.12')).toMatchObject({
      release: '0.5.12',
      chatReasoningIsText: true,
      chatSplitsSpeculativeChunks: true,
    });
    expect(benchServingRules('0.5.23.post1')).toMatchObject({
      release: '0.5.23',
      serverVersion: '0.5.23.post1',
      chatReasoningIsText: true,
    });
    expect(benchServingRules('0.5.1')).toMatchObject({ release: '0.5.4' });
  });

  it('assumes the newest checked release when the server does not say, and says so', () => {
    const r = benchServingRules(undefined);
    expect(r).toMatchObject({ release: '0.5.23', serverVersion: undefined });
    expect(rulesLabel(r)).toBe('bench_serving 0.5.23 (assumed: the server did not report its version)');
    expect(rulesLabel(benchServingRules('0.5.9'))).toBe('bench_serving 0.5.9 (server reports sglang 0.5.9)');
    expect(serverVersionOf({ version: '0.5.4' })).toBe('0.5.4');
    expect(serverVersionOf({ version: 'dev' })).toBeUndefined();
    expect(serverVersionOf(undefined)).toBeUndefined();
  });
});

// A reasoning model's answer: two reasoning chunks, then three content chunks, then usage.
function reasoningStream(version: string): RequestResult {
  const t = newTally('chat', 0, benchServingRules(version));
  tallyEvent(t, chunk({ role: 'assistant', content: '' }), 5);
  tallyEvent(t, chunk({ reasoning_content: 'Let me' }), 20);
  tallyEvent(t, chunk({ reasoning_content: ' think' }), 40);
  tallyEvent(t, chunk({ content: 'The' }), 70);
  tallyEvent(t, chunk({ content: ' answer' }), 80);
  tallyEvent(t, chunk({ content: ' is' }), 95);
  tallyEvent(t, usageOnly({ prompt_tokens: 30, completion_tokens: 5, reasoning_tokens: 2 }), 96);
  tallyEvent(t, DONE, 97);
  return finishTally(t, 0, 0, 97);
}

describe('chat tally: TTFT and ITL on the text the release times, reasoning beside them', () => {
  it('0.5.4/0.5.9: content only, so the think phase is inside TTFT and reported as time to first reasoning', () => {
    for (const v of ['0.5.4', '0.5.9']) {
      const r = reasoningStream(v);
      expect(r.ttftMs, v).toBe(70);
      expect(r.chunkItlsMs, v).toEqual([10, 15]);
      expect(r.firstReasoningMs, v).toBe(20);
      expect(r.firstContentMs, v).toBe(70);
      expect(r.reasoningChunks, v).toBe(2);
      expect(r.reasoningTokens, v).toBe(2);
      expect(r.e2eMs, v).toBe(97);
      expect(r.generatedText, v).toBe('The answer is'); // what this release retokenizes
    }
  });

  it('0.5.12/0.5.23: reasoning_content counts as text, so TTFT is the first reasoning chunk', () => {
    for (const v of ['0.5.12', '0.5.23']) {
      const r = reasoningStream(v);
      expect(r.ttftMs, v).toBe(20);
      expect(r.chunkItlsMs, v).toEqual([20, 30, 10, 15]);
      expect(r.firstReasoningMs, v).toBe(20);
      expect(r.firstContentMs, v).toBe(70);
      expect(r.generatedText, v).toBe('Let me thinkThe answer is');
    }
  });

  it("reads vLLM's `reasoning` as reasoning, and completion_tokens_details.reasoning_tokens", () => {
    const t = newTally('chat', 0, benchServingRules('0.5.23'));
    tallyEvent(t, chunk({ reasoning: 'hmm' }), 10);
    tallyEvent(t, chunk({ content: 'ok' }), 30);
    tallyEvent(
      t,
      usageOnly({ prompt_tokens: 3, completion_tokens: 2, completion_tokens_details: { reasoning_tokens: 1 } }),
      31,
    );
    tallyEvent(t, DONE, 32);
    const r = finishTally(t, 0, 0, 32);
    expect(r.ttftMs).toBe(10);
    expect(r.reasoningChunks).toBe(1);
    expect(r.reasoningTokens).toBe(1);
  });

  it('content-only rules with per-chunk usage: reasoning tokens are not spread over a content chunk', () => {
    const t = newTally('chat', 0, benchServingRules('0.5.9'));
    tallyEvent(t, chunk({ reasoning_content: 'x' }, { completion_tokens: 2 }), 10);
    tallyEvent(t, chunk({ content: 'a' }, { completion_tokens: 3 }), 50); // TTFT
    tallyEvent(t, chunk({ reasoning_content: 'y' }, { completion_tokens: 4 }), 60);
    tallyEvent(t, chunk({ content: 'bc' }, { completion_tokens: 6 }), 80); // 30 ms over its own 2 tokens
    tallyEvent(t, DONE, 81);
    const r = finishTally(t, 0, 0, 81);
    expect(r.ttftMs).toBe(50);
    expect(r.itlsMs).toEqual([15, 15]);
    expect(r.chunkItlsMs).toEqual([30]);
  });

  it('a content chunk that adds no tokens still gets its own per-chunk ITL, as bench_serving times every non-empty chunk', () => {
    const t = newTally('chat', 0, benchServingRules('0.5.23'));
    tallyEvent(t, chunk({ content: 'a' }, { completion_tokens: 1 }), 10);
    tallyEvent(t, chunk({ content: 'b' }, { completion_tokens: 1 }), 25);
    tallyEvent(t, chunk({ content: 'c' }, { completion_tokens: 2 }), 40);
    tallyEvent(t, DONE, 41);
    const r = finishTally(t, 0, 0, 41);
    expect(r.chunkItlsMs).toEqual([15, 15]);
    expect(r.itlsMs).toEqual([30]);
  });
});

const req = (p: Partial<RequestResult>): RequestResult => ({
  index: 0,
  sentAtMs: 0,
  ttftMs: 0,
  itlsMs: [],
  e2eMs: 0,
  outputTokens: 0,
  promptTokens: 0,
  ...p,
});
const chatRun: LevelRun = {
  concurrency: 2,
  durationMs: 1000,
  startedAt: 't',
  maxInFlight: 2,
  warmup: [],
  results: [
    req({
      index: 0,
      ttftMs: 20,
      e2eMs: 100,
      outputTokens: 5,
      promptTokens: 40,
      itlsMs: [5, 5, 10, 10],
      chunkItlsMs: [10, 20],
      firstReasoningMs: 20,
      firstContentMs: 70,
      reasoningChunks: 2,
      reasoningTokens: 2,
    }),
    req({
      index: 1,
      ttftMs: 30,
      e2eMs: 90,
      outputTokens: 5,
      promptTokens: 41,
      itlsMs: [15, 15],
      chunkItlsMs: [30],
      firstContentMs: 30,
      reasoningChunks: 0,
    }),
    req({ index: 2, ttftMs: 0, e2eMs: 5, promptTokens: 0, error: 'HTTP 500' }),
  ],
};
const chatMeta = { backend: 'sglang-oai-chat', datasetName: 'sharegpt' } as const;

describe('summarizeLevel for chat', () => {
  it("total_input_tokens is bench_serving's prompt_len sum (raw prompts), the server's templated count beside it", () => {
    const rec = summarizeLevel(chatRun, { ...chatMeta, promptLens: [12, 13, 99] });
    expect(rec.total_input_tokens).toBe(25); // successful requests only, as calculate_metrics sums
    expect(rec.input_throughput).toBe(25);
    expect(rec.total_throughput).toBe(35);
    expect(rec.total_input_tokens_server).toBe(81);
  });

  it("without counts for the raw prompts, bench_serving's input figures are null rather than the server's", () => {
    const rec = summarizeLevel(chatRun, chatMeta);
    expect(rec.total_input_tokens).toBeNull();
    expect(rec.input_throughput).toBeNull();
    expect(rec.total_throughput).toBeNull();
    expect(rec.total_input_tokens_server).toBe(81);
  });

  it("/generate: the server prompt_tokens is bench_serving's count, so it fills both", () => {
    const gen = summarizeLevel(chatRun, { backend: 'sglang', datasetName: 'random' });
    expect(gen.total_input_tokens).toBe(81);
    expect(gen.total_input_tokens_server).toBe(81);
    expect(gen.chat_text_basis).toBeNull();
    expect(gen.requests_with_reasoning).toBeNull();
  });

  it('ITL per chunk without speculation; split per token with speculation from 0.5.9; never split on 0.5.4', () => {
    const plain = summarizeLevel(chatRun, { ...chatMeta, rules: benchServingRules('0.5.23') });
    expect(plain.itl_per).toBe('chunk');
    expect(plain.mean_itl_ms).toBe(20);
    const spec = summarizeLevel(chatRun, { ...chatMeta, rules: benchServingRules('0.5.9'), acceptLength: 2.5 });
    expect(spec.itl_per).toBe('token');
    expect(spec.mean_itl_ms).toBe(10);
    const old = summarizeLevel(chatRun, { ...chatMeta, rules: benchServingRules('0.5.4'), acceptLength: 2.5 });
    expect(old.itl_per).toBe('chunk');
    expect(old.mean_itl_ms).toBe(20);
  });

  it('reports the reasoning phase beside TTFT, with the rules it followed', () => {
    const rec = summarizeLevel(chatRun, { ...chatMeta, rules: benchServingRules('0.5.9') });
    expect(rec.chat_text_basis).toBe('content');
    expect(rec.bench_serving_rules).toBe('bench_serving 0.5.9 (server reports sglang 0.5.9)');
    expect(rec.requests_with_reasoning).toBe(1);
    expect(rec.mean_time_to_first_reasoning_ms).toBe(20);
    expect(rec.median_time_to_first_reasoning_ms).toBe(20);
    expect(rec.mean_time_to_first_content_ms).toBe(50);
    expect(rec.total_reasoning_chunks).toBe(2);
    expect(rec.total_reasoning_tokens).toBe(2);
    expect(summarizeLevel(chatRun, { ...chatMeta, rules: benchServingRules('0.5.12') }).chat_text_basis).toBe(
      'reasoning+content',
    );
  });
});

describe('tokenizePrompts: SGLang /tokenize as bench_serving counts', () => {
  const bodies: unknown[] = [];
  const server = useFakeServer((body, res, req) => {
    if (req.url !== '/tokenize') return void res.writeHead(404).end('{"detail":"Not Found"}');
    const parsed = JSON.parse(body) as { prompt: string[]; add_special_tokens: boolean };
    bodies.push(parsed);
    // The shape SGLang answers (TokenizeResponse): a BOS when asked for special tokens, one id per word.
    const tokens = parsed.prompt.map((p) => [
      ...(parsed.add_special_tokens ? [1] : []),
      ...p.split(' ').map((_, i) => i + 2),
    ]);
    res
      .writeHead(200, { 'Content-Type': 'application/json' })
      .end(JSON.stringify({ tokens, count: tokens.map((t) => t.length), max_model_len: 4096 }));
  });

  it('asks once per distinct prompt, special tokens added, and maps counts back in prompt order', async () => {
    const got = await tokenizePrompts(server.baseUrl, ['a b', 'c d e', 'a b']);
    expect(got).toEqual({ lens: [3, 4, 3] });
    expect(bodies.at(-1)).toEqual({ prompt: ['a b', 'c d e'], add_special_tokens: true });
  });

  it('answers: without special tokens, and an empty answer is 0 without asking', async () => {
    const got = await tokenizePrompts(server.baseUrl, ['x y', ''], undefined, { addSpecialTokens: false });
    expect(got.lens).toEqual([2, 0]);
    expect(bodies.at(-1)).toEqual({ prompt: ['x y'], add_special_tokens: false });
  });

  it('says why when the server has no /tokenize', async () => {
    const got = await tokenizePrompts(`${server.baseUrl}/nope`, ['a']);
    expect(got.lens).toBeUndefined();
    expect(got.problem).toBe('POST /tokenize answered HTTP 404');
  });
});
