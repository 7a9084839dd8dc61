import { describe, expect, it } from 'vitest';
import type { ProcRecord } from '../../src/hosts/host.js';
import { killGroupWith, type GroupOps, type GroupSignal } from '../../src/hosts/protocol/kill-group.js';
import type { ProcStat } from '../../src/hosts/protocol/proc-stat.js';

const rec: ProcRecord = {
  launchId: 'r.server.0',
  pid: 500,
  pgid: 500,
  startTime: '1000',
  argvHash: '',
  argv: ['x'],
  logPath: '/l',
  exitPath: '/e',
  startedAt: '',
  host: 'local',
};
type FakeProc = ProcStat & { ignoresTerm: boolean; token?: string };
const st = (pid: number, pgrp: number, startTime: string, ignoresTerm = false, token?: string): FakeProc => ({
  pid,
  comm: 'x',
  state: 'S',
  ppid: 1,
  pgrp,
  session: pgrp,
  startTime,
  ignoresTerm,
  token,
});
const strip = ({ ignoresTerm: _i, token: _t, ...s }: FakeProc): ProcStat => s;

/** A fake process table with a fake clock: TERM ends processes that do not ignore it, KILL ends all. */
function fakeHost(procs: FakeProc[]) {
  let now = 0;
  const sent: [number, GroupSignal][] = [];
  const sentTo: [number, GroupSignal][] = [];
  const hit = (p: FakeProc, signal: GroupSignal) => {
    if (signal === 'KILL' || !p.ignoresTerm) procs.splice(procs.indexOf(p), 1);
  };
  const ops: GroupOps = {
    scan: async () => procs.map(strip),
    scanLaunch: async (token) => ({
      stats: procs.map(strip),
      marked: procs.filter((p) => p.token === token).map(strip),
    }),
    signalGroup: async (pgid, signal) => {
      const members = procs.filter((p) => p.pgrp === pgid);
      if (members.length === 0) return false;
      sent.push([pgid, signal]);
      for (const m of members) hit(m, signal);
      return true;
    },
    signalProcess: async (pid, startTime, signal) => {
      const p = procs.find((q) => q.pid === pid && q.startTime === startTime);
      if (!p) return false;
      sentTo.push([pid, signal]);
      hit(p, signal);
      return true;
    },
    sleep: async (ms) => {
      now += ms;
    },
    now: () => now,
  };
  return { ops, sent, sentTo, procs, elapsed: () => now };
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
    expect(await killGroupWith(h.ops, rec, { graceMs: 1000, pollMs: 100 })).toEqual({
      signals: ['TERM', 'KILL'],
      groupEmpty: true,
    });
    expect(h.elapsed()).toBeGreaterThanOrEqual(1000);
    expect(h.sent).toEqual([
      [500, 'TERM'],
      [500, 'KILL'],
    ]);
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
    expect(await killGroupWith(h.ops, rec, { graceMs: 200, verifyMs: 300 })).toEqual({
      signals: ['TERM', 'KILL'],
      groupEmpty: false,
    });
  });
  it('refuses to signal group 0 or 1', async () => {
    const h = fakeHost([]);
    await expect(killGroupWith(h.ops, { ...rec, pgid: 1 })).rejects.toThrow(/refusing/);
    await expect(killGroupWith(h.ops, { ...rec, pgid: 0 })).rejects.toThrow(/refusing/);
  });
});

describe('killGroupWith, marked launch', () => {
  const marked: ProcRecord = { ...rec, token: 'r.train.0-00ff' };
  it('without escapees it is the group stop of an unmarked launch, result included', async () => {
    const h = fakeHost([st(500, 500, '1000', false, 'r.train.0-00ff'), st(501, 500, '1001', false, 'r.train.0-00ff')]);
    expect(await killGroupWith(h.ops, marked, { graceMs: 1000 })).toEqual({ signals: ['TERM'], groupEmpty: true });
    expect(h.sent).toEqual([[500, 'TERM']]);
  });
  it("signals an escapee's own group when its leader is marked, and reports it", async () => {
    // torchrun (501) died; its worker 600 leads a session of its own, with a dataloader child 601.
    const h = fakeHost([
      st(600, 600, '2000', false, 'r.train.0-00ff'),
      st(601, 600, '2001', false, 'r.train.0-00ff'),
      st(900, 900, '5'),
    ]);
    expect(await killGroupWith(h.ops, marked, { graceMs: 1000 })).toEqual({
      signals: ['TERM'],
      groupEmpty: true,
      escaped: { found: 2, stopped: 2 },
    });
    expect(h.sent).toEqual([[600, 'TERM']]);
    expect(h.procs.map((p) => p.pid)).toEqual([900]);
  });
  it('signals the escapee alone when the leader of its group is not marked', async () => {
    // 700 sits in group 900, whose leader carries no token: group 900 is not ours to signal.
    const h = fakeHost([st(700, 900, '3000', true, 'r.train.0-00ff'), st(900, 900, '5')]);
    expect(await killGroupWith(h.ops, marked, { graceMs: 300, pollMs: 100 })).toEqual({
      signals: ['TERM', 'KILL'],
      groupEmpty: true,
      escaped: { found: 1, stopped: 1 },
    });
    expect(h.sent).toEqual([]);
    expect(h.sentTo).toEqual([
      [700, 'TERM'],
      [700, 'KILL'],
    ]);
    expect(h.procs.map((p) => p.pid)).toEqual([900]);
  });
  it("ignores a process carrying another launch's token", async () => {
    const h = fakeHost([st(600, 600, '2000', false, 'r.train.0-aaaa')]);
    expect(await killGroupWith(h.ops, marked)).toEqual({ signals: [], groupEmpty: true });
    expect(h.procs).toHaveLength(1);
  });
  it('does not trust a marked stat whose start time changed since the first read (pid recycled mid-scan)', async () => {
    const h = fakeHost([st(600, 600, '2000')]);
    h.ops.scanLaunch = async () => ({ stats: [strip(st(600, 600, '2000'))], marked: [strip(st(600, 600, '2999'))] });
    expect(await killGroupWith(h.ops, marked)).toEqual({ signals: [], groupEmpty: true });
    expect(h.sent).toEqual([]);
    expect(h.sentTo).toEqual([]);
  });
  it('reports an escapee that survives KILL', async () => {
    const h = fakeHost([st(600, 600, '2000', true, 'r.train.0-00ff')]);
    h.ops.signalGroup = async (pgid, signal) => {
      h.sent.push([pgid, signal]);
      return true; // D state
    };
    expect(await killGroupWith(h.ops, marked, { graceMs: 200, verifyMs: 300 })).toEqual({
      signals: ['TERM', 'KILL'],
      groupEmpty: false,
      escaped: { found: 1, stopped: 0 },
    });
  });
});
