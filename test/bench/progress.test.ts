import { describe, expect, it } from 'vitest';
import { progressBar, renderSweepProgress } from '../../src/bench/progress.js';
import { describeActivity } from '../../src/cli/phase.js';

describe('benchmark progress for the CLI', () => {
  it('draws a fixed-width bar with eighth-block resolution', () => {
    expect(progressBar(0.43)).toBe('▕████████▋           ▏');
    expect(progressBar(0)).toBe('▕                    ▏');
    expect(progressBar(1)).toBe('▕████████████████████▏');
    expect(progressBar(7)).toBe(progressBar(1));
    expect(progressBar(Number.NaN)).toBe(progressBar(0));
    for (const f of [0.01, 0.5, 0.99]) expect([...progressBar(f)]).toHaveLength(22);
  });

  it('renders the current level and the finished ones (golden)', () => {
    const details = {
      variant: 'eagle3',
      level: 4,
      levels: 8,
      concurrency: 10,
      done: 12,
      total: 20,
      finished: [
        { concurrency: 1, outputThroughput: 158.2, acceptLength: 3.1, errors: 0, stored: true },
        { concurrency: 2, outputThroughput: 12345, acceptLength: null, errors: 2, stored: false },
      ],
    };
    expect(renderSweepProgress(details)).toBe(
      'eagle3 level 4/8, concurrency 10 ▕████████████        ▏ 12/20 requests\n      done, output tok/s: c1 158 (α 3.10) · c2 12k 2 failed',
    );
    expect(describeActivity({ activityType: 'benchmarkSweep', attempt: 1, details })).toBe(
      renderSweepProgress(details),
    );
  });

  it('copes with details from an older worker or none at all', () => {
    expect(renderSweepProgress(undefined)).toBe('benchmark sweep starting');
    expect(renderSweepProgress({ variant: 'baseline' })).toBe('baseline sweep starting');
    expect(renderSweepProgress({ variant: 'baseline', concurrency: 5, done: 1, total: 4, finished: 'x' })).toBe(
      'baseline concurrency 5 ▕█████               ▏ 1/4 requests',
    );
  });
});
