import { describe, expect, it } from 'vitest';
import { acceptLengthOf, finishTally, newTally, tallyEvent } from '../../src/bench/tally.js';

const gen = (text: string, completion: number, extra: Record<string, unknown> = {}) => ({
  data: JSON.stringify({ text, meta_info: { prompt_tokens: 12, completion_tokens: completion, ...extra } }),
});
const DONE = { data: '[DONE]' };

describe('tally for /generate (bench_serving sglang backend rules)', () => {
  it('TTFT from the first text chunk, ITL = gap / new tokens, one entry per token', () => {
    const t = newTally('generate', 1000);
    tallyEvent(t, gen('a', 1), 1050); // TTFT 50
    tallyEvent(t, gen('abc', 3), 1070); // 2 tokens in 20 ms → 10, 10
    tallyEvent(t, gen('abcd', 4), 1075); // 1 token in 5 ms → 5
    tallyEvent(t, gen('abcdefg', 7, { e2e_latency: 0.08, spec_verify_ct: 2 }), 1105); // 3 in 30 → 10 ×3
    expect(tallyEvent(t, DONE, 1106)).toBe(true);
    const r = finishTally(t, 3, 12.5, 2000);
    expect(r).toEqual({
      index: 3,
      sentAtMs: 12.5,
      ttftMs: 50,
      itlsMs: [10, 10, 5, 10, 10, 10],
      e2eMs: 106,
      outputTokens: 7,
      promptTokens: 12,
      acceptLength: 3.5,
      specVerifyCt: 2, // kept for the pooled accept length (accept.ts)
      serverE2eMs: 80,
      generatedText: 'abcdefg', // the last non-empty cumulative text, as bench_serving keeps it
    });
  });

  it('gives the first chunk’s tokens no ITL even when it carries several', () => {
    const t = newTally('generate', 0);
    tallyEvent(t, gen('abc', 3), 40);
    tallyEvent(t, gen('abcde', 5), 60);
    tallyEvent(t, DONE, 61);
    const r = finishTally(t, 0, 0, 61);
    expect(r.ttftMs).toBe(40);
    expect(r.itlsMs).toEqual([10, 10]);
  });

  it('skips a chunk that adds no tokens, rolling its gap into the next chunk', () => {
    const t = newTally('generate', 0);
    tallyEvent(t, gen('a', 1), 10);
    tallyEvent(t, gen('a', 1), 30); // no new tokens: ignored, timestamp not advanced
    tallyEvent(t, gen('ab', 2), 40);
    tallyEvent(t, DONE, 41);
    expect(finishTally(t, 0, 0, 41).itlsMs).toEqual([30]);
  });

  it('ignores chunks with empty text for timing but keeps their meta_info', () => {
    const t = newTally('generate', 0);
    tallyEvent(t, gen('', 0), 5);
    tallyEvent(t, gen('a', 1), 20);
    tallyEvent(t, gen('ab', 2, { spec_accept_length: 2.5 }), 30);
    tallyEvent(t, DONE, 31);
    const r = finishTally(t, 0, 0, 31);
    expect(r.ttftMs).toBe(20);
    expect(r.acceptLength).toBe(2.5);
  });

  it('records a stream error frame as the request error', () => {
    const t = newTally('generate', 0);
    tallyEvent(t, gen('a', 1), 10);
    expect(tallyEvent(t, { data: '{"error":{"message":"CUDA out of memory"}}' }, 20)).toBe(true);
    expect(finishTally(t, 0, 0, 20).error).toBe('stream error: CUDA out of memory');
  });

  it('marks a stream that ended without [DONE] as failed', () => {
    const t = newTally('generate', 0);
    tallyEvent(t, gen('a', 1), 10);
    expect(finishTally(t, 0, 0, 20).error).toBe('stream ended before [DONE]');
  });
});

describe('tally for /v1/chat/completions', () => {
  const chunk = (content: string | undefined, usage?: Record<string, number>, role?: string) => ({
    data: JSON.stringify({
      choices: [{ index: 0, delta: { ...(role ? { role } : {}), ...(content !== undefined ? { content } : {}) } }],
      ...(usage ? { usage } : {}),
    }),
  });

  it('one ITL per content chunk without per-chunk usage; final usage gives the counts', () => {
    const t = newTally('chat', 0);
    tallyEvent(t, chunk('', undefined, 'assistant'), 5);
    tallyEvent(t, chunk('Hel'), 30);
    tallyEvent(t, chunk('lo'), 42);
    tallyEvent(t, chunk(' you'), 50);
    tallyEvent(t, { data: JSON.stringify({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 5 } }) }, 51);
    tallyEvent(t, DONE, 52);
    const r = finishTally(t, 0, 0, 52);
    expect(r.ttftMs).toBe(30);
    expect(r.itlsMs).toEqual([12, 8]);
    expect(r.outputTokens).toBe(5);
    expect(r.promptTokens).toBe(9);
  });

  it('splits multi-token chunks per token with continuous usage stats', () => {
    const t = newTally('chat', 0);
    tallyEvent(t, chunk('a', { prompt_tokens: 4, completion_tokens: 1 }), 20);
    tallyEvent(t, chunk('bcd', { prompt_tokens: 4, completion_tokens: 4 }), 50);
    tallyEvent(t, DONE, 51);
    expect(finishTally(t, 0, 0, 51).itlsMs).toEqual([10, 10, 10]);
  });

  it('counts content chunks when no usage arrives at all', () => {
    const t = newTally('chat', 0);
    tallyEvent(t, chunk('a'), 20);
    tallyEvent(t, chunk('b'), 25);
    tallyEvent(t, DONE, 26);
    expect(finishTally(t, 0, 0, 26).outputTokens).toBe(2);
  });
});

describe('acceptLengthOf', () => {
  it('prefers spec_accept_length, else completion_tokens / spec_verify_ct, else undefined', () => {
    expect(acceptLengthOf({ spec_accept_length: 3.2, completion_tokens: 10, spec_verify_ct: 5 })).toBe(3.2);
    expect(acceptLengthOf({ completion_tokens: 10, spec_verify_ct: 4 })).toBe(2.5);
    expect(acceptLengthOf({ completion_tokens: 10, spec_verify_ct: 0 })).toBeUndefined();
    expect(acceptLengthOf({ completion_tokens: 10 })).toBeUndefined();
  });
});
