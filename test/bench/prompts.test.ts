import { describe, expect, it } from 'vitest';
import { promptsFromConversations, randomPrompts, seededRandom } from '../../src/bench/prompts.js';

describe('randomPrompts', () => {
  it('is deterministic per seed and differs across seeds', () => {
    expect(randomPrompts(5, 40, 7)).toEqual(randomPrompts(5, 40, 7));
    expect(randomPrompts(5, 40, 7)).not.toEqual(randomPrompts(5, 40, 8));
  });

  it('gives n prompts of exactly inputLenWords words, all distinct', () => {
    const p = randomPrompts(50, 32, 1);
    expect(p).toHaveLength(50);
    for (const s of p) expect(s.split(' ')).toHaveLength(32);
    expect(new Set(p).size).toBe(50);
  });

  it('golden: seed 1 starts the same way on every machine', () => {
    expect(randomPrompts(2, 6, 1)).toMatchInlineSnapshot(`
      [
        "table at table music used ancient",
        "discover many are quiet story from",
      ]
    `);
  });

  it('PRNG stays in [0, 1)', () => {
    const next = seededRandom(123);
    for (let i = 0; i < 10_000; i++) {
      const x = next();
      expect(x >= 0 && x < 1).toBe(true);
    }
  });

  it('rejects nonsense sizes', () => {
    expect(() => randomPrompts(-1, 5, 1)).toThrow(RangeError);
    expect(() => randomPrompts(1, 0, 1)).toThrow(RangeError);
  });
});

describe('promptsFromConversations', () => {
  const lines = [
    JSON.stringify({
      id: 'a',
      conversations: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'What is EAGLE?' },
        { role: 'assistant', content: 'A drafter.' },
      ],
    }),
    'not json {',
    '',
    JSON.stringify({
      id: 'b',
      conversations: [
        { from: 'human', value: 'Explain SSE.' },
        { from: 'gpt', value: '...' },
      ],
    }),
    JSON.stringify({ id: 'c', conversations: 'nope' }),
    JSON.stringify({ id: 'd', conversations: [{ role: 'assistant', content: 'only me' }] }),
    JSON.stringify({
      id: 'e',
      conversations: [
        { role: 'user', content: '   ' },
        { role: 'user', content: 'later' },
      ],
    }),
    JSON.stringify([1, 2]),
    JSON.stringify({ id: 'f', conversations: [null, { role: 'user', content: 'Third.' }] }),
    JSON.stringify({ id: 'g', conversations: [{ role: 'user', content: 'Fourth.' }] }),
  ];

  it('takes the first user turn of SpecForge and ShareGPT rows, skipping malformed rows', () => {
    expect(promptsFromConversations(lines, 10)).toEqual(['What is EAGLE?', 'Explain SSE.', 'Third.', 'Fourth.']);
  });

  it('stops after n prompts', () => {
    expect(promptsFromConversations(lines, 2)).toEqual(['What is EAGLE?', 'Explain SSE.']);
  });
});
