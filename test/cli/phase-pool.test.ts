/** The phase line while a pool runs a batch on every server: one summed clause, not one per server. */
import { describe, expect, it } from 'vitest';
import { describePending, type PendingActivity } from '../../src/cli/phase.js';

const batch = (n: number, done: number, rate: number, attempt = 1): PendingActivity => ({
  activityType: 'generatePoolBatch',
  attempt,
  details: { done, total: 100, rate, batch: n, server: `gpu-${n}:30000` },
});

describe('the phase line of a pool', () => {
  it('names each batch while there are two', () => {
    expect(describePending([batch(1, 10, 2), batch(2, 20, 3)])).toBe(
      'batch 1 on gpu-1:30000: 10/100 (2.0/s); batch 2 on gpu-2:30000: 20/100 (3.0/s)',
    );
  });

  it('sums eight batches into one clause, with what else is pending beside it', () => {
    const eight = Array.from({ length: 8 }, (_, i) => batch(i, 10 * i, 1.5, i === 3 ? 2 : 1));
    const hold = { activityType: 'holdGpuLease', attempt: 1, details: { phase: 'holding gpu-a GPUs 0–7' } };
    const launch = { activityType: 'launchServer', attempt: 1 };
    expect(describePending([hold, ...eight, launch])).toBe(
      '8 batches running, 280/800 of their samples done (12.0/s in all) [1 on a later attempt]; launching the server',
    );
  });
});
