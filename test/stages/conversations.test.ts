import { describe, expect, it } from 'vitest';
import {
  estimateTokens,
  hasUserTurn,
  parseSampleLine,
  renderForExtraction,
  unsafeIdReason,
} from '../../src/stages/common/conversations.js';

describe('parseSampleLine', () => {
  it('reads the SpecForge format, keeping reasoning_content', () => {
    const line = JSON.stringify({
      id: 'a1',
      conversations: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello', reasoning_content: 'greet back' },
      ],
    });
    expect(parseSampleLine(line)).toEqual({
      ok: true,
      sample: {
        id: 'a1',
        turns: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello', reasoning_content: 'greet back' },
        ],
      },
    });
  });

  it('reads ShareGPT, mapping human/gpt/system and numeric ids', () => {
    const line = JSON.stringify({
      id: 7,
      conversations: [
        { from: 'system', value: 's' },
        { from: 'human', value: 'q' },
        { from: 'gpt', value: 'a' },
      ],
    });
    const r = parseSampleLine(line);
    expect(r).toEqual({
      ok: true,
      sample: {
        id: '7',
        turns: [
          { role: 'system', content: 's' },
          { role: 'user', content: 'q' },
          { role: 'assistant', content: 'a' },
        ],
      },
    });
  });

  it.each([
    ['{"id": "x", "conversations": [', /^bad JSON/],
    ['[1,2]', /^not a JSON object$/],
    ['{"conversations": [{"role":"user","content":"q"}]}', /^no id$/],
    ['{"id": {"a":1}, "conversations": [{"role":"user","content":"q"}]}', /^id is not a string/],
    ['{"id": "x"}', /^no conversations$/],
    ['{"id": "x", "conversations": []}', /^no conversations/],
    ['{"id": "x", "conversations": "hi"}', /^conversations is not an array$/],
    ['{"id": "x", "conversations": [{"role":"tool","content":"q"}]}', /^turn 1: unknown role "tool"$/],
    [
      '{"id": "x", "conversations": [{"role":"user","content":"q"},{"from":"bot","value":"a"}]}',
      /^turn 2: unknown role "bot"$/,
    ],
    ['{"id": "x", "conversations": [{"role":"user","content":3}]}', /^turn 1: content is not a string$/],
    ['{"id": "x", "conversations": [{"text":"q"}]}', /^turn 1: no role/],
  ])('rejects %s with a reason', (line, reason) => {
    const r = parseSampleLine(line);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(reason);
  });
});

describe('hasUserTurn', () => {
  it('is false for a system+assistant-only sample and true once a user speaks', () => {
    expect(
      hasUserTurn({
        id: 'a',
        turns: [
          { role: 'system', content: 's' },
          { role: 'assistant', content: 'a' },
        ],
      }),
    ).toBe(false);
    expect(hasUserTurn({ id: 'a', turns: [{ role: 'user', content: 'q' }] })).toBe(true);
  });
});

describe('unsafeIdReason', () => {
  it.each(['demo-0001', 'sharegpt_12_3', 'a.b', '123'])('accepts %s', (id) => {
    expect(unsafeIdReason(id)).toBeNull();
  });
  it.each(['', '../x', 'a/b', 'a\\b', '..', 'x..y', '.hidden', 'a\nb', 'x'.repeat(201)])('refuses %j', (id) => {
    expect(unsafeIdReason(id)).toMatch(/^unsafe id: /);
  });
});

describe('renderForExtraction', () => {
  it('tags each turn with its role, in order (golden)', () => {
    const text = renderForExtraction({
      id: 'a',
      turns: [
        { role: 'system', content: 'Be kind.' },
        { role: 'user', content: 'Hi there' },
        { role: 'assistant', content: 'Hello!', reasoning_content: 'A greeting.' },
      ],
    });
    expect(text).toBe(
      '<|system|>\nBe kind.\n<|user|>\nHi there\n<|assistant|>\n<think>\nA greeting.\n</think>\nHello!\n',
    );
  });

  it('estimates tokens as whitespace words', () => {
    expect(estimateTokens('<|user|>\nHi there\n')).toBe(3);
    expect(estimateTokens('   ')).toBe(0);
  });
});
