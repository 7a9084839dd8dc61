import { describe, expect, it } from 'vitest';
import { SseByteFramer } from '../../src/bench/sse-bytes.js';
import { parseSse } from '../../src/bench/sse.js';
import { finishTally, newTally, tallyEvent, tallyFramed } from '../../src/bench/tally.js';
import type { BenchApi } from '../../src/bench/types.js';

/** Run one stream through both paths with the same arrival times; they must agree exactly. */
function bothWays(api: BenchApi, frames: string[]) {
  const slow = newTally(api, 0);
  const fast = newTally(api, 0);
  const framer = new SseByteFramer();
  let t = 0;
  for (const f of frames) {
    t += 10;
    for (const ev of parseSse([f])) tallyEvent(slow, ev, t);
    for (const ev of framer.push(Buffer.from(f))) tallyFramed(fast, ev, t);
  }
  return { slow: finishTally(slow, 0, 0, t), fast: finishTally(fast, 0, 0, t) };
}

const gen = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;

describe('tallyFramed (byte fast path) matches tallyEvent', () => {
  it('on a speculative /generate stream with multi-token chunks, an empty-text chunk and final meta', () => {
    const frames = [
      gen({ text: '', output_ids: [], meta_info: { completion_tokens: 0, prompt_tokens: 5 } }),
      gen({ text: 'a', output_ids: [1], meta_info: { completion_tokens: 1, prompt_tokens: 5 } }),
      gen({ text: 'a b c', output_ids: [1, 2, 3], meta_info: { completion_tokens: 3, prompt_tokens: 5 } }),
      gen({ text: 'a b c', output_ids: [1, 2, 3], meta_info: { completion_tokens: 3, prompt_tokens: 5 } }),
      gen({
        text: 'a b c d e f',
        output_ids: [1, 2, 3, 4, 5, 6],
        meta_info: { completion_tokens: 6, prompt_tokens: 5, spec_verify_ct: 3, e2e_latency: 0.05 },
      }),
      'data: [DONE]\n\n',
    ];
    const { slow, fast } = bothWays('generate', frames);
    expect(fast).toEqual(slow);
    expect(fast.ttftMs).toBe(20);
    // chunk 3 adds 2 tokens over 10 ms; chunk 4 adds none (rolled over); chunk 5 adds 3 over 20 ms
    expect(fast.itlsMs).toEqual([5, 5, 20 / 3, 20 / 3, 20 / 3]);
    expect(fast.acceptLength).toBe(2);
    expect(fast.serverE2eMs).toBe(50);
    expect(fast.error).toBeUndefined();
  });

  it('on a stream error frame, orjson spacing and the chat API', () => {
    const err = bothWays('generate', [
      gen({ text: 'a', meta_info: { completion_tokens: 1 } }),
      'data: {"error": {"message": "boom"}}\n\n',
    ]);
    expect(err.fast).toEqual(err.slow);
    expect(err.fast.error).toBe('stream error: boom');
    const spaced = bothWays('generate', [
      'data: {"text": "x y", "meta_info": {"completion_tokens": 2}}\n\n',
      'data: [DONE]\n\n',
    ]);
    expect(spaced.fast).toEqual(spaced.slow);
    const chat = bothWays('chat', [
      gen({ choices: [{ delta: { role: 'assistant' } }] }),
      gen({ choices: [{ delta: { content: 'hi' } }], usage: { completion_tokens: 1 } }),
      gen({ choices: [{ delta: { content: ' there you' } }], usage: { completion_tokens: 3 } }),
      gen({ choices: [], usage: { completion_tokens: 3, prompt_tokens: 4 } }),
      'data: [DONE]\n\n',
    ]);
    expect(chat.fast).toEqual(chat.slow);
    expect(chat.fast.itlsMs).toEqual([5, 5]);
  });
});
