import { describe, expect, it } from 'vitest';
import {
  featureBytesPerToken,
  paddedTokenBound,
  parseTokenCounts,
  rowTokens,
  tokensPerWord,
} from '../../src/stages/extract/chat-tokens.js';

describe('disk estimate in SpecForge tokens', () => {
  it('bounds padded storage by the longest rows of as many batches as there are', () => {
    // 5 rows, batch 2 → 3 batches; the three longest are 9, 7, 5 → at most 2 × 21 stored tokens
    expect(paddedTokenBound([1, 9, 5, 7, 2], 2)).toBe(42);
    // batch 1 pads nothing
    expect(paddedTokenBound([1, 9, 5], 1)).toBe(15);
    // never more than every row padded to the longest
    expect(paddedTokenBound([9, 9, 9], 4)).toBe(27);
    // the bound holds for every arrangement of rows into batches
    const lengths = [3, 11, 4, 8, 8, 1, 6];
    const bound = paddedTokenBound(lengths, 3);
    for (let s = 0; s < 50; s++) {
      const shuffled = [...lengths].sort(() => Math.sin(s * 13 + lengths.length) - 0.5);
      let stored = 0;
      for (let i = 0; i < shuffled.length; i += 3) stored += 3 * Math.max(...shuffled.slice(i, i + 3));
      expect(stored).toBeLessThanOrEqual(bound);
    }
  });

  it('learns tokens per word from rows that were not truncated', () => {
    expect(tokensPerWord([10, 20, 30], [40, 80, 64], 64)).toBe(4); // the third row hit max-length
    expect(tokensPerWord([], [], 64)).toBe(1);
    expect(rowTokens(10, 4.2, 2048)).toBe(42);
    expect(rowTokens(1000, 4.2, 2048)).toBe(2048);
    expect(rowTokens(0, 4.2, 2048)).toBe(1);
  });

  it('counts the bytes of every stored tensor', () => {
    // hidden H + aux 3H in bf16, plus int64 input_ids and loss_mask
    expect(featureBytesPerToken(7168)).toBe(8 * 7168 + 16);
  });

  it('reads the script result and refuses a short or malformed one', () => {
    expect(parseTokenCounts('noise\n{"method":"specforge","counts":[3,4]}\n', 2)).toEqual({
      method: 'specforge',
      counts: [3, 4],
    });
    expect(() => parseTokenCounts('{"method":"specforge","counts":[3]}', 2)).toThrow(/counted 1 conversations of 2/);
    expect(() => parseTokenCounts('Traceback ...', 1)).toThrow(/printed no result/);
    expect(() => parseTokenCounts('{"method":"x","counts":[1]}', 1)).toThrow(/unexpected result/);
  });
});
