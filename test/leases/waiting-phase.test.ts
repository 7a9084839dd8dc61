/** What a waiting run's heartbeat says: which GPUs it waits for, and who is in the way since when. */
import { describe, expect, it } from 'vitest';
import { waitingPhase } from '../../src/activities/leases.js';
import type { LeaseEntryView, LeaseSnapshot } from '../../src/leases/protocol.js';

const entry = (runId: string, gpus: string[], grantedAt?: string): LeaseEntryView => ({
  holder: { workflowId: runId, execution: 'x', runId, label: 'sweep' },
  gpus,
  ttlMs: 120_000,
  requestedAt: '2026-12-02T00:00:00.000Z',
  renewedAt: '2026-12-02T00:00:00.000Z',
  ...(grantedAt ? { grantedAt } : {}),
});
const snap = (holders: LeaseEntryView[], waiters: LeaseEntryView[] = []): LeaseSnapshot => ({
  host: 'gpu-a',
  now: '',
  holders,
  waiters,
  expired: [],
});
const all8 = ['0', '1', '2', '3', '4', '5', '6', '7'];

describe('the waiting phase', () => {
  it('names the holder in the way and since when', () => {
    expect(waitingPhase('gpu-a', all8, snap([entry('run-x', ['4'], '2026-12-02T00:01:00.000Z')]))).toBe(
      'waiting for gpu-a GPUs 0–7, held by run run-x (sweep) since 2026-12-02T00:01:00.000Z',
    );
  });

  it('names the earlier waiter when the GPUs are free but promised to it', () => {
    expect(waitingPhase('gpu-a', ['5'], snap([entry('run-x', ['0'], 't')], [entry('run-big', all8)]))).toBe(
      'waiting for gpu-a GPUs 5, behind run run-big (sweep) in the queue',
    );
  });

  it("says why when the host's lease workflow does not answer", () => {
    expect(waitingPhase('gpu-a', ['*'], 'no poller')).toBe(
      "waiting for gpu-a GPUs all (the host's lease workflow does not answer yet: no poller)",
    );
  });
});
