/**
 * Stopping a recorded launch: TERM to its process group, wait, KILL, verify. The loop is
 * host-agnostic; a host supplies how to scan /proc and how to signal a group.
 *
 * Only the recorded group is ever signalled, and only after a fresh scan shows it still
 * has members and its leader pid has not been recycled. Signalling a group whose leader
 * has already exited is still safe: a process group id stays reserved for as long as any
 * process is in that group (the kernel will not give that number to a new process, so no
 * one else can create a group with it), and a process can only join a group inside its
 * own session — ours is a fresh setsid session. So while the scan finds members with our
 * pgid, they are the launch's own children and grandchildren.
 */
import type { KillResult, ProcRecord } from './host.js';
import { groupView } from './proc-identity.js';
import type { ProcStat } from './proc-stat.js';

export type GroupSignal = 'TERM' | 'KILL';

export interface GroupOps {
  /** Parsed /proc/<pid>/stat of every process (at least the leader and the group's members). */
  scan(): Promise<ProcStat[]>;
  /** Signal every process in group pgid; false when the group no longer exists (ESRCH). */
  signalGroup(pgid: number, signal: GroupSignal): Promise<boolean>;
  sleep(ms: number): Promise<void>;
  now(): number;
}

export interface KillTiming {
  graceMs?: number;
  /** How often the group is re-scanned while waiting. */
  pollMs?: number;
  /** How long to wait for the group to vanish after KILL before reporting it non-empty. */
  verifyMs?: number;
}

async function groupIsEmpty(ops: GroupOps, record: ProcRecord): Promise<boolean> {
  const view = groupView(await ops.scan(), record);
  return view.leaderRecycled || view.members.length === 0;
}

/** Poll until the group is empty or the deadline passes; returns whether it emptied. */
async function waitEmpty(ops: GroupOps, record: ProcRecord, waitMs: number, pollMs: number): Promise<boolean> {
  const deadline = ops.now() + waitMs;
  for (;;) {
    if (await groupIsEmpty(ops, record)) return true;
    const left = deadline - ops.now();
    if (left <= 0) return false;
    await ops.sleep(Math.min(pollMs, left));
  }
}

export async function killGroupWith(ops: GroupOps, record: ProcRecord, timing: KillTiming = {}): Promise<KillResult> {
  const { graceMs = 10_000, pollMs = 100, verifyMs = 5_000 } = timing;
  const signals: string[] = [];
  if (record.pgid <= 1) throw new Error(`refusing to signal process group ${record.pgid}`);

  if (await groupIsEmpty(ops, record)) return { signals, groupEmpty: true };
  if (!(await ops.signalGroup(record.pgid, 'TERM'))) return { signals, groupEmpty: true };
  signals.push('TERM');
  if (await waitEmpty(ops, record, graceMs, pollMs)) return { signals, groupEmpty: true };

  // waitEmpty's last scan just found members of our (unrecycled) group, so KILL is still aimed at it.
  if (!(await ops.signalGroup(record.pgid, 'KILL'))) return { signals, groupEmpty: true };
  signals.push('KILL');
  return { signals, groupEmpty: await waitEmpty(ops, record, verifyMs, pollMs) };
}
