/**
 * Whether a recorded process is still ours. pid numbers are recycled, so identity is the
 * pid AND its start time; everything here is a pure decision over parsed /proc data, so
 * LocalHost (reading /proc directly) and SshHost (reading it through a shell) agree.
 */
import type { ProcRecord, ProcStatus } from '../host.js';
import { isDead, parseProcStats, type ProcStat } from './proc-stat.js';
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
  const leaderRecycled =
    leader !== null && !isDead(leader) && record.startTime !== '' && leader.startTime !== record.startTime;
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

/**
 * One scan for a marked launch: every process's stat line, then — read after each marked
 * process's environ — the stat lines of the processes whose environment holds the launch's
 * token (same uid; unreadable environs skipped).
 */
export interface LaunchScan {
  stats: ProcStat[];
  marked: ProcStat[];
}

export interface LaunchView extends GroupView {
  /** Live marked processes outside the recorded group (in a session of their own, say). */
  escapees: ProcStat[];
  /** Every live marked process, group members included: the only ones whose groups may be signalled. */
  marked: ProcStat[];
}

/**
 * A marked process counts only when its stat line read after its environ has the start
 * time of the one read before: otherwise the pid changed hands between the two reads and
 * the environ may have been someone else's. Identity is pid AND start time throughout.
 */
export function verifiedMarked(scan: LaunchScan): ProcStat[] {
  const before = new Map(scan.stats.map((s) => [s.pid, s]));
  return scan.marked.filter((m) => {
    const b = before.get(m.pid);
    return b !== undefined && b.startTime === m.startTime && !isDead(b) && !isDead(m);
  });
}

/** The recorded group plus, for a marked launch, its processes that left the group. */
export function launchView(scan: LaunchScan, record: ProcRecord): LaunchView {
  const group = groupView(scan.stats, record);
  if (record.token === undefined) return { ...group, escapees: [], marked: [] };
  const marked = verifiedMarked(scan);
  const inGroup = new Set(group.members.map((m) => m.pid));
  return { ...group, marked, escapees: marked.filter((m) => !inGroup.has(m.pid)) };
}

/** No process of the launch remains. */
export function launchIsEmpty(view: LaunchView): boolean {
  return (view.leaderRecycled || view.members.length === 0) && view.escapees.length === 0;
}

/**
 * The status of a launch whose leader is no longer alive, given a scan: 'orphans' while
 * any of its processes still runs, otherwise the leader's own status unchanged.
 */
export function remnantStatus(leaderStatus: ProcStatus, view: LaunchView): ProcStatus {
  if (leaderStatus.state === 'alive' || launchIsEmpty(view)) return leaderStatus;
  const members = view.leaderRecycled ? 0 : view.members.length;
  return {
    state: 'orphans',
    code: leaderStatus.state === 'exited' ? leaderStatus.code : null,
    processes: members + view.escapees.length,
    escaped: view.escapees.length,
  };
}

/** PROC_LAUNCH_SCAN's output (launch-script.ts), split at the marker with this scan's nonce. */
export function parseLaunchScan(text: string, nonce: string): LaunchScan {
  const marker = `\n#marked-${nonce}\n`;
  const at = text.lastIndexOf(marker);
  // Without the marker the scan did not run to its end: no answer rather than "nothing marked".
  if (at < 0) throw new Error('process scan ended early (no marker in its output)');
  return { stats: parseProcStats(text.slice(0, at)), marked: parseProcStats(text.slice(at + marker.length)) };
}
