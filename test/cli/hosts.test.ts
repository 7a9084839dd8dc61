/** `aerie hosts`: the listing drawn from the lease workflows' tables. */
import { describe, expect, it } from 'vitest';
import { renderHosts } from '../../src/cli/hosts.js';
import type { LeaseEntryView } from '../../src/leases/protocol.js';

const entry = (runId: string, gpus: string[], extra: Partial<LeaseEntryView> = {}): LeaseEntryView => ({
  holder: { workflowId: runId, execution: 'x', runId, label: 'demo' },
  gpus,
  ttlMs: 120_000,
  requestedAt: '2026-12-02T00:00:00.000Z',
  renewedAt: '2026-12-02T00:09:58.000Z',
  ...extra,
});
const now = Date.parse('2026-12-02T00:10:00.000Z');
const all8 = ['0', '1', '2', '3', '4', '5', '6', '7'];

describe('aerie hosts', () => {
  it('lists holders with their GPUs and renewal, waiters in queue order, and expiries', () => {
    const text = renderHosts(
      [
        {
          host: 'gpu-a',
          snapshot: {
            host: 'gpu-a',
            now: '',
            holders: [entry('run-x', all8, { grantedAt: '2026-12-02T00:01:00.000Z' })],
            waiters: [entry('run-y', all8), entry('run-z', ['3'])],
            expired: [
              { ...entry('run-old', ['0']), expiredAt: '2026-12-01T23:59:00.000Z', held: true },
              { ...entry('run-queued', ['0']), expiredAt: '2026-12-01T23:59:30.000Z', held: false },
            ],
          },
        },
        { host: 'gpu-b' },
        { host: 'gpu-c', problem: 'its lease workflow does not answer: is an `aerie worker` running?' },
      ],
      now,
    );
    expect(text).toBe(
      [
        'gpu-a:',
        '  GPUs 0–7     held by run run-x (demo) since 2026-12-02T00:01:00.000Z (renewed 2 s ago, expires 120 s after its last renewal)',
        '  waiting  1. run run-y (demo) for GPUs 0–7 since 2026-12-02T00:00:00.000Z',
        '  waiting  2. run run-z (demo) for GPUs 3 since 2026-12-02T00:00:00.000Z',
        '  expired: run run-old (demo) on GPUs 0 at 2026-12-01T23:59:00.000Z (its renewals had stopped)',
        'gpu-b: free (no run holds or waits for its GPUs)',
        'gpu-c: its lease workflow does not answer: is an `aerie worker` running?',
        '',
      ].join('\n'),
    );
  });

  it('says so when no host has leases', () => {
    expect(renderHosts([], now)).toMatch(/^no host has leased GPUs/);
  });
});
