// The phase line with a GPU lease held beside every stage: the holder is news only alone or when lost.
import { describe, expect, it } from 'vitest';
import { describeActivity, describePending } from '../../src/cli/phase.js';

const hold = (phase?: string) => ({ activityType: 'holdGpuLease', attempt: 1, details: phase ? { phase } : undefined });
const generate = { activityType: 'generateData', attempt: 1, details: { done: 10, total: 96 } };

describe('phase line with GPU leases', () => {
  it('words the lease activities for a researcher, never their type names', () => {
    const waiting = 'waiting for gpu-a GPUs 0–7, held by run r1 (demo) since 2026-12-02T00:01:00Z';
    expect(describeActivity({ activityType: 'acquireGpuLease', attempt: 1, details: { phase: waiting } })).toBe(
      waiting,
    );
    expect(describeActivity({ activityType: 'acquireGpuLease', attempt: 1 })).toBe('waiting for the GPU lease');
    expect(describeActivity(hold())).toBe('holding the GPU lease');
    expect(describeActivity({ activityType: 'releaseGpuLease', attempt: 1 })).toBe('giving the GPU lease back');
  });

  it('leaves the holder out beside a stage, keeps it alone or when the lease was lost', () => {
    const beside = describePending([hold('holding local GPUs 0–7'), generate]);
    expect(beside).toBe(describeActivity(generate));
    expect(beside).not.toContain('holdGpuLease');
    expect(describePending([hold('holding local GPUs 0–7')])).toBe('holding local GPUs 0–7');
    expect(describePending([hold('local GPUs 0–7: lost, asking again'), generate])).toContain('lost');
    expect(describePending([])).toBeUndefined();
  });
});
