import { describe, expect, it } from 'vitest';
import type { ProcRecord } from '../../src/hosts/host.js';
import {
  groupView,
  isRecordedProcess,
  launchView,
  liveRecordedGroups,
  parseLaunchScan,
  remnantStatus,
  statusFrom,
} from '../../src/hosts/protocol/proc-identity.js';
import type { ProcStat } from '../../src/hosts/protocol/proc-stat.js';

const rec = (over: Partial<ProcRecord> = {}): ProcRecord => ({
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
  ...over,
});
const st = (pid: number, pgrp: number, startTime: string, state = 'S'): ProcStat => ({
  pid,
  comm: 'x',
  state,
  ppid: 1,
  pgrp,
  session: pgrp,
  startTime,
});

describe('statusFrom', () => {
  it('alive when pid and start time match', () => {
    expect(statusFrom(st(500, 500, '1000'), null, rec())).toEqual({ state: 'alive' });
  });
  it('not alive when the pid was recycled (other start time)', () => {
    expect(statusFrom(st(500, 500, '2000'), null, rec())).toEqual({ state: 'gone' });
    expect(statusFrom(st(500, 500, '2000'), '0\n', rec())).toEqual({ state: 'exited', code: 0 });
  });
  it('not alive as a zombie', () => {
    expect(statusFrom(st(500, 500, '1000', 'Z'), '137\n', rec())).toEqual({ state: 'exited', code: 137 });
  });
  it('exited with the code from the exit file, or null when unreadable', () => {
    expect(statusFrom(null, '3\n', rec())).toEqual({ state: 'exited', code: 3 });
    expect(statusFrom(null, '', rec())).toEqual({ state: 'exited', code: null });
  });
  it('gone without process and exit file', () => {
    expect(statusFrom(null, null, rec())).toEqual({ state: 'gone' });
  });
  it('never calls an unknown start time alive', () => {
    expect(isRecordedProcess(st(500, 500, '1000'), rec({ startTime: '' }))).toBe(false);
  });
});

describe('groupView', () => {
  it('lists live members of the recorded group, without zombies', () => {
    const stats = [st(500, 500, '1000'), st(501, 500, '1001'), st(502, 500, '1002', 'Z'), st(600, 600, '50')];
    expect(groupView(stats, rec()).members.map((s) => s.pid)).toEqual([500, 501]);
  });
  it('members of a group whose leader exited are still the group', () => {
    const stats = [st(501, 500, '1001'), st(600, 600, '50')];
    expect(groupView(stats, rec())).toEqual({ leaderRecycled: false, members: [st(501, 500, '1001')] });
  });
  it('a recycled leader means our group is gone: no members', () => {
    const stats = [st(500, 500, '9999'), st(501, 500, '10000')];
    expect(groupView(stats, rec())).toEqual({ leaderRecycled: true, members: [] });
  });
  it('liveRecordedGroups keeps only groups with members', () => {
    const stats = [st(501, 500, '1001'), st(700, 700, '9')];
    const groups = liveRecordedGroups(stats, [
      rec(),
      rec({ pid: 800, pgid: 800 }),
      rec({ pid: 700, pgid: 700, startTime: '8' }),
    ]);
    expect([...groups]).toEqual([500]);
  });
});

describe('launchView and remnantStatus', () => {
  const marked = rec({ token: 'r.server.0-ab' });
  it('an unmarked record sees its group only, whatever is marked', () => {
    const v = launchView({ stats: [st(600, 600, '2')], marked: [st(600, 600, '2')] }, rec());
    expect(v).toEqual({ leaderRecycled: false, members: [], escapees: [], marked: [] });
  });
  it('marked processes outside the group are escapees, also when the leader pid was recycled', () => {
    const stats = [st(500, 500, '9999'), st(600, 600, '2'), st(601, 600, '3')];
    const v = launchView({ stats, marked: [st(600, 600, '2'), st(601, 600, '3')] }, marked);
    expect(v.leaderRecycled).toBe(true);
    expect(v.escapees.map((e) => e.pid)).toEqual([600, 601]);
    expect(remnantStatus({ state: 'gone' }, v)).toEqual({ state: 'orphans', code: null, processes: 2, escaped: 2 });
  });
  it('a marked stat read with another start time than the first read does not count', () => {
    const v = launchView({ stats: [st(600, 600, '2')], marked: [st(600, 600, '3')] }, marked);
    expect(v.escapees).toEqual([]);
    expect(remnantStatus({ state: 'exited', code: 0 }, v)).toEqual({ state: 'exited', code: 0 });
  });
  it('a group member left behind by the leader makes the launch orphaned, not escaped', () => {
    const v = launchView({ stats: [st(501, 500, '2')], marked: [st(501, 500, '2')] }, marked);
    expect(remnantStatus({ state: 'exited', code: 137 }, v)).toEqual({
      state: 'orphans',
      code: 137,
      processes: 1,
      escaped: 0,
    });
  });
});

describe('parseLaunchScan', () => {
  const line = (pid: number, comm: string) =>
    `${pid} (${comm}) S 1 ${pid} ${pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 77 0 0`;
  it("splits at the marker with this scan's nonce, never at a look-alike in a command name", () => {
    const text = `${line(10, '\n#marked-x\n')}\n${line(11, 'a')}\n\n#marked-n1\n${line(12, 'w')}\n`;
    const scan = parseLaunchScan(text, 'n1');
    expect(scan.stats.map((s) => s.pid)).toEqual([10, 11]);
    expect(scan.marked.map((s) => s.pid)).toEqual([12]);
  });
  it('refuses output without its marker (the scan did not finish)', () => {
    expect(() => parseLaunchScan(line(10, 'a'), 'n1')).toThrow(/ended early/);
  });
});
