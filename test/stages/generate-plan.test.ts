import { describe, expect, it } from 'vitest';
import type { Turn } from '../../src/stages/common/conversations.js';
import { planGenerate, regenerateTurns } from '../../src/stages/generate/plan.js';
import { runPool } from '../../src/stages/common/pool.js';
import { splitJsonlLines } from '../../src/stages/common/jsonl-shards.js';

const conv = (id: string, turns: object[]) => JSON.stringify({ id, conversations: turns });

describe('splitJsonlLines', () => {
  it('keeps 1-based line numbers and drops blank lines and CRs', () => {
    expect(splitJsonlLines('a\n\n  \r\nb\r\nc')).toEqual([
      { lineNo: 1, text: 'a' },
      { lineNo: 4, text: 'b' },
      { lineNo: 5, text: 'c' },
    ]);
  });
});

describe('planGenerate', () => {
  it('classifies lines: regenerate, skip (no user), error (unsafe id), reject (malformed, duplicate)', () => {
    const lines = splitJsonlLines(
      [
        conv('a', [{ role: 'user', content: 'q' }]),
        'not json',
        conv('b', [{ role: 'system', content: 's' }]),
        conv('a', [{ role: 'user', content: 'again' }]),
        conv('../evil', [{ role: 'user', content: 'q' }]),
      ].join('\n'),
    );
    const plan = planGenerate(lines);
    expect(plan.map((e) => [e.lineNo, e.action])).toEqual([
      [1, 'regenerate'],
      [2, 'reject'],
      [3, 'skip'],
      [4, 'reject'],
      [5, 'error'],
    ]);
    expect(plan[1]).toMatchObject({ reason: expect.stringMatching(/^bad JSON/) });
    expect(plan[3]).toMatchObject({ id: 'a', reason: 'duplicate id' });
    expect(plan[4]).toMatchObject({ error: 'unsafe id: contains a path separator' });
  });
});

describe('regenerateTurns', () => {
  it('re-answers each assistant turn from the conversation so far and answers a trailing user turn', async () => {
    const seen: string[][] = [];
    const answer = async (soFar: Turn[]): Promise<Turn> => {
      seen.push(soFar.map((t) => `${t.role}:${t.content}`));
      return { role: 'assistant', content: `A${seen.length}` };
    };
    const out = await regenerateTurns(
      [
        { role: 'assistant', content: 'orphan' },
        { role: 'system', content: 's' },
        { role: 'user', content: 'q1' },
        { role: 'assistant', content: 'old1' },
        { role: 'user', content: 'q2' },
      ],
      answer,
    );
    expect(out).toEqual([
      { role: 'system', content: 's' },
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: 'A1' },
      { role: 'user', content: 'q2' },
      { role: 'assistant', content: 'A2' },
    ]);
    expect(seen).toEqual([
      ['system:s', 'user:q1'],
      ['system:s', 'user:q1', 'assistant:A1', 'user:q2'],
    ]);
  });
});

describe('runPool', () => {
  it('keeps exactly `concurrency` items in flight until the queue drains (no batch barrier)', async () => {
    let inFlight = 0;
    const samples: number[] = [];
    const durations = Array.from({ length: 40 }, (_, i) => (i % 7) * 3 + 1);
    await runPool(
      durations,
      async (ms) => {
        inFlight++;
        samples.push(inFlight);
        await new Promise((r) => setTimeout(r, ms));
        inFlight--;
      },
      { concurrency: 5 },
    );
    // Every start after the first five happens as one finishes, so the start-time count is always 5.
    expect(samples.slice(4, 36).every((n) => n === 5)).toBe(true);
    expect(Math.max(...samples)).toBe(5);
  });

  it('stops taking items after the first error and rethrows it', async () => {
    const started: number[] = [];
    await expect(
      runPool(
        [1, 2, 3, 4, 5, 6],
        async (n) => {
          started.push(n);
          if (n === 2) throw new Error('boom');
          await new Promise((r) => setTimeout(r, 5));
        },
        { concurrency: 2 },
      ),
    ).rejects.toThrow('boom');
    expect(started.length).toBeLessThan(6);
  });
});
