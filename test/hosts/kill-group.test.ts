import { describe, expect, it } from 'vitest';
import type { ProcRecord } from '../../src/hosts/host.js';
import { killGroupWith, type GroupOps, type GroupSignal } from '../../src/hosts/kill-group.js';
import type { ProcStat } from '../../src/hosts/proc-stat.js';

const rec: ProcRecord = {
  launchId: 'r.server.0', pid: 500, pgid: 500, startTime: '1000', argvHash: '', argv: ['x'], logPath: '/l',
  exitPath: '/e', startedAt: '', host: 'local',
};
const st = (pid: number, pgrp: number, startTime: string, ignoresTerm = false): ProcStat & { ignoresTerm: boolean } => ({
  pid, comm: 'x', state: 'S', ppid: 1, pgrp, session: pgrp, startTime, ignoresTerm,
});

/** A fake process table with a fake clock: TERM ends processes that do not ignore it, KILL ends all. */
function fakeHost(procs: ReturnType<typeof st>[]) {
  let now = 0;
  const sent: [number, GroupSignal][] = [];
  const ops: GroupOps = {
    scan: async () => procs.map(({ ignoresTerm: _i, ...s }) => s),
    signalGroup: async (pgid, signal) => {
      const members = procs.filter((p) => p.pgrp === pgid);
      if (members.length === 0) return false;
      sent.push([pgid, signal]);
      for (const m of members) if (signal === 'KILL' || !m.ignoresTerm) procs.splice(procs.indexOf(m), 1);
      return true;
    },
    sleep: async (ms) => {
      now += ms;
    },
    now: () => now,
  };
  return { ops, sent, procs, elapsed: () => now };
}

describe('killGroupWith', () => {
  it('TERM is enough for a group that honours it', async () => {
    const h = fakeHost([st(500, 500, '1000'), st(501, 500, '1001'), st(900, 900, '5')]);
    expect(await killGroupWith(h.ops, rec, { graceMs: 1000 })).toEqual({ signals: ['TERM'], groupEmpty: true });
    expect(h.sent).toEqual([[500, 'TERM']]);
    expect(h.procs.map((p) => p.pid)).toEqual([900]);
  });
  it('KILL after the grace period when a member ignores TERM', async () => {
    const h = fakeHost([st(500, 500, '1000'), st(501, 500, '1001', true)]);
    expect(await killGroupWith(h.ops, rec, { graceMs: 1000, pollMs: 100 })).toEqual({ signals: ['TERM', 'KILL'], groupEmpty: true });
    expect(h.elapsed()).toBeGreaterThanOrEqual(1000);
    expect(h.sent).toEqual([[500, 'TERM'], [500, 'KILL']]);
  });
  it('signals a group whose leader exited but whose children remain', async () => {
    const h = fakeHost([st(501, 500, '1001')]);
    expect(await killGroupWith(h.ops, rec)).toEqual({ signals: ['TERM'], groupEmpty: true });
  });
  it('sends nothing when the leader pid now belongs to someone else', async () => {
    const h = fakeHost([st(500, 500, '7777'), st(501, 500, '7778')]);
    expect(await killGroupWith(h.ops, rec)).toEqual({ signals: [], groupEmpty: true });
    expect(h.sent).toEqual([]);
    expect(h.procs).toHaveLength(2);
  });
  it('sends nothing to an empty group', async () => {
    const h = fakeHost([st(900, 900, '5')]);
    expect(await killGroupWith(h.ops, rec)).toEqual({ signals: [], groupEmpty: true });
    expect(h.sent).toEqual([]);
  });
  it('reports a group that survives KILL as not empty', async () => {
    const h = fakeHost([st(500, 500, '1000', true)]);
    h.ops.signalGroup = async (_pgid, signal) => {
      h.sent.push([500, signal]);
      return true; // an unkillable (D-state) process
    };
    expect(await killGroupWith(h.ops, rec, { graceMs: 200, verifyMs: 300 })).toEqual({ signals: ['TERM', 'KILL'], groupEmpty: false });
  });
  it('refuses to signal group 0 or 1', async () => {
    const h = fakeHost([]);
    await expect(killGroupWith(h.ops, { ...rec, pgid: 1 })).rejects.toThrow(/refusing/);
    await expect(killGroupWith(h.ops, { ...rec, pgid: 0 })).rejects.toThrow(/refusing/);
  });
});
