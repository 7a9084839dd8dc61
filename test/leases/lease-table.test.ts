/** The lease table's decisions: who gets which GPUs, in which order, and when a silent holder loses them. */
import { describe, expect, it } from 'vitest';
import { describeGpus, type LeaseRequest } from '../../src/leases/protocol.js';
import { gpusConflict, LeaseTable } from '../../src/workflows/lease-table.js';

const req = (run: string, gpus: string[], ttlMs = 1000): LeaseRequest => ({
  holder: { workflowId: run, execution: 'e1', runId: run },
  gpus,
  ttlMs,
});
const key = (run: string) => `${run}/e1`;
const all8 = ['0', '1', '2', '3', '4', '5', '6', '7'];

describe('lease table', () => {
  it('grants free GPUs at once and makes a conflicting request wait until the holder releases', () => {
    const t = new LeaseTable();
    t.request(req('a', all8), 0);
    expect(t.grant(0)).toEqual([key('a')]);
    t.request(req('b', all8), 10);
    expect(t.grant(10)).toEqual([]);
    expect(t.snapshot('gpu-a', 10).waiters.map((w) => w.holder.runId)).toEqual(['b']);
    expect(t.release(key('a'))).toBe(true);
    expect(t.grant(20)).toEqual([key('b')]);
    expect(t.snapshot('gpu-a', 20).holders.map((h) => [h.holder.runId, h.grantedAt])).toEqual([
      ['b', new Date(20).toISOString()],
    ]);
  });

  it('lets runs on disjoint GPUs hold at once', () => {
    const t = new LeaseTable();
    t.request(req('a', ['0', '1']), 0);
    t.request(req('b', ['2', '3']), 0);
    expect(t.grant(0)).toEqual([key('a'), key('b')]);
  });

  it('serves waiters first come, first served: a later small request does not pass an earlier one on its GPUs', () => {
    const t = new LeaseTable();
    t.request(req('a', ['0']), 0);
    t.grant(0);
    t.request(req('big', all8), 1); // waits for a's GPU 0
    t.request(req('small', ['5']), 2); // GPU 5 is free, but big asked first for it
    t.request(req('other', ['0']), 3);
    expect(t.grant(3)).toEqual([]);
    t.release(key('a'));
    expect(t.grant(4)).toEqual([key('big')]);
  });

  it('expires a holder that stops renewing, keeps one that renews, and records the expiry', () => {
    const t = new LeaseTable();
    t.request(req('a', ['0'], 1000), 0);
    t.request(req('b', ['1'], 1000), 0);
    t.grant(0);
    expect(t.renew(key('b'), 900)).toBe(true);
    expect(t.nextExpiry()).toBe(1000);
    expect(t.expire(999)).toEqual([]);
    expect(t.expire(1000)).toEqual([key('a')]);
    expect(t.renew(key('a'), 1001)).toBe(false);
    const snap = t.snapshot('h', 1001);
    expect(snap.holders.map((h) => h.holder.runId)).toEqual(['b']);
    expect(snap.expired.map((e) => [e.holder.runId, e.held, e.expiredAt])).toEqual([
      ['a', true, new Date(1000).toISOString()],
    ]);
  });

  it('keeps a repeated request in its place (a retried activity), counting it as a renewal', () => {
    const t = new LeaseTable();
    t.request(req('a', ['0']), 0);
    t.grant(0);
    t.request(req('b', ['0']), 1);
    t.request(req('c', ['0']), 2);
    t.request(req('b', ['0']), 500);
    expect(t.snapshot('h', 500).waiters.map((w) => [w.holder.runId, w.renewedAt])).toEqual([
      ['b', new Date(500).toISOString()],
      ['c', new Date(2).toISOString()],
    ]);
  });

  it('survives a round trip through its plain state (continue-as-new)', () => {
    const t = new LeaseTable();
    t.request(req('a', ['0']), 0);
    t.grant(0);
    t.request(req('b', ['0']), 1);
    const again = new LeaseTable(JSON.parse(JSON.stringify(t.state)) as typeof t.state);
    again.release(key('a'));
    expect(again.grant(2)).toEqual([key('b')]);
  });

  it('treats an unknown inventory (*) as every GPU', () => {
    expect(gpusConflict(['*'], ['3'])).toBe(true);
    expect(gpusConflict(['1'], ['*'])).toBe(true);
    expect(gpusConflict(['1'], ['2'])).toBe(false);
    expect(gpusConflict([], ['*'])).toBe(false);
    expect(describeGpus(all8)).toBe('0–7');
    expect(describeGpus(['0', '2'])).toBe('0,2');
    expect(describeGpus(['*'])).toBe('all');
  });
});
