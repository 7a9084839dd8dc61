import { describe, expect, it } from 'vitest';
import { estimatedBytesPerToken } from '../../src/stages/extract/plan.js';
import { formatBytes } from '../../src/stages/common/disk-full.js';
import { featureBytesPerToken } from '../../src/stages/extract/chat-tokens.js';
import { selfCheckPicks } from '../../src/stages/extract/samples.js';

describe('extract sizes', () => {
  it('counts aux 3H + final H in bf16 per token, and 16 more bytes of ids and mask in a feature file', () => {
    expect(estimatedBytesPerToken(512)).toBe(4096);
    expect(featureBytesPerToken(512)).toBe(4112);
  });

  it('prints sizes in binary units', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(3 * 2 ** 30)).toBe('3.0 GiB');
  });
});

describe('selfCheckPicks', () => {
  const ids = Array.from({ length: 100 }, (_, k) => `s${k}`);

  it('keeps the first samples for the early check and spreads the rest over the run', () => {
    const p = selfCheckPicks(ids, 8, 32);
    expect([...p.early]).toEqual(ids.slice(0, 8));
    expect(p.all.size).toBe(32);
    expect(p.all.has('s8')).toBe(true);
    // ...and reaches the end of the run.
    expect(Math.max(...[...p.all].map((id) => Number(id.slice(1))))).toBeGreaterThanOrEqual(95);
  });

  it('keeps everything when the run is smaller than the check', () => {
    const p = selfCheckPicks(ids.slice(0, 5), 8, 32);
    expect(p.early.size).toBe(5);
    expect(p.all.size).toBe(5);
  });

  it('keeps nothing when nothing is left to do', () => {
    expect(selfCheckPicks([], 8, 32).all.size).toBe(0);
  });
});
