import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { isDead, parseProcStat, parseProcStats } from '../../src/hosts/protocol/proc-stat.js';

// A real-shaped stat line: 52 fields, field 22 (start time) = 39622.
const tail =
  '6005 6005 3014 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 39622 3133440 378 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0';
const line = (pid: number, comm: string, state = 'S') => `${pid} (${comm}) ${state} ${tail}\n`;

describe('parseProcStat', () => {
  it('reads pid, state, ppid, pgrp, session and field 22', () => {
    expect(parseProcStat(line(6009, 'cat', 'R'))).toEqual({
      pid: 6009,
      comm: 'cat',
      state: 'R',
      ppid: 6005,
      pgrp: 6005,
      session: 3014,
      startTime: '39622',
    });
  });
  it.each(['my proc', 'a) S 1 2 3 (b', ')(', 'x)))', '((', ' '])('survives a command name of %j', (comm) => {
    const s = parseProcStat(line(77, comm));
    expect(s).toMatchObject({ pid: 77, comm, state: 'S', pgrp: 6005, startTime: '39622' });
  });
  it('rejects text that is not a stat line', () => {
    expect(parseProcStat('')).toBeNull();
    expect(parseProcStat('hello (x) S 1 2')).toBeNull();
    expect(parseProcStat('12 (x) S 1 2 3')).toBeNull();
  });
  it('parses this process', async () => {
    const s = parseProcStat(await readFile('/proc/self/stat', 'utf8'));
    expect(s?.pid).toBe(process.pid);
    expect(s?.startTime).toMatch(/^\d+$/);
  });
  it('knows zombies are dead', () => {
    expect(isDead(parseProcStat(line(5, 'python3', 'Z'))!)).toBe(true);
    expect(isDead(parseProcStat(line(5, 'python3', 'D'))!)).toBe(false);
  });
});

describe('parseProcStats (a concatenated scan)', () => {
  it('splits records, keeps a newline inside a command name, drops junk', () => {
    const text =
      line(10, 'sh') + line(11, 'evil\n12 x') + 'cat: /proc/13/stat: No such file\n' + line(14, 'python3 -m');
    const stats = parseProcStats(text);
    expect(stats.map((s) => [s.pid, s.comm])).toEqual([
      [10, 'sh'],
      [11, 'evil\n12 x'],
      [14, 'python3 -m'],
    ]);
  });
});
