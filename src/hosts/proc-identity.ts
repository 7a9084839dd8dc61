/**
 * Whether a recorded process is still ours. pid numbers are recycled, so identity is the
 * pid AND its start time; everything here is a pure decision over parsed /proc data, so
 * LocalHost (reading /proc directly) and SshHost (reading it through a shell) agree.
 */
import type { ProcRecord, ProcStatus } from './host.js';
import { isDead, type ProcStat } from './proc-stat.js';
import { parseExitFile } from './records.js';

/** The live process recorded by `record`: same pid, same start time, not a zombie. */
export function isRecordedProcess(stat: ProcStat | null, record: ProcRecord): boolean {
  return stat !== null && record.startTime !== '' && stat.startTime === record.startTime && !isDead(stat);
}

/**
 * alive > exited(code from the wrapper's .exit file) > gone. `leaderStat` is the stat of
 * record.pid (null when absent); `exitText` the .exit file's content (null when absent).
 */
export function statusFrom(leaderStat: ProcStat | null, exitText: string | null, record: ProcRecord): ProcStatus {
  if (isRecordedProcess(leaderStat, record)) return { state: 'alive' };
  if (exitText !== null) return { state: 'exited', code: parseExitFile(exitText) };
  return { state: 'gone' };
}

export interface GroupView {
  /** record.pid is alive but started at another time: the pid was recycled, so the group is long gone. */
  leaderRecycled: boolean;
  /** Live (non-zombie) processes whose process group is the recorded one. */
  members: ProcStat[];
}

/**
 * The recorded group as seen in a /proc scan. A recycled leader pid implies our group is
 * empty (the kernel does not hand out a pid that is still some group's id), so nothing in
 * a group of that number can be ours then.
 */
export function groupView(stats: readonly ProcStat[], record: ProcRecord): GroupView {
  const leader = stats.find((s) => s.pid === record.pid) ?? null;
  const leaderRecycled = leader !== null && !isDead(leader) && record.startTime !== '' && leader.startTime !== record.startTime;
  if (leaderRecycled) return { leaderRecycled, members: [] };
  const members = stats.filter((s) => s.pgrp === record.pgid && !isDead(s));
  return { leaderRecycled, members };
}

/** Process groups (pgid) of recorded launches that may still hold resources, for "ours" checks. */
export function liveRecordedGroups(stats: readonly ProcStat[], records: readonly ProcRecord[]): Set<number> {
  const groups = new Set<number>();
  for (const record of records) {
    if (groupView(stats, record).members.length > 0) groups.add(record.pgid);
  }
  return groups;
}
