/**
 * Stopping a recorded launch: TERM to its process group (and to its escaped processes),
 * wait, KILL what remains, verify. The loop is host-agnostic; a host supplies how to scan
 * /proc and how to signal a group or one process.
 *
 * The recorded group. It is signalled only after a fresh scan shows it still has members
 * and its leader pid has not been recycled. Signalling a group whose leader has already
 * exited is still safe: a process group id stays reserved for as long as any process is
 * in that group (the kernel will not give that number to a new process, so no one else
 * can create a group with it), and a process can only join a group inside its own session
 * — ours is a fresh setsid session. So members with our pgid are processes of the launch.
 *
 * The group is not the whole launch, though: a descendant may call setsid() and leave
 * both our session and our group, and torchrun does exactly that for every worker — torch
 * 2.13 `torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py:66`
 * sets `start_new_session=True` on the worker's Popen (and line 49 hands it a copy of
 * torchrun's own environment). Killing only the group leaves the workers training and
 * holding GPU memory (seen on the H200: test/fixtures/real/specforge-20e2e3f0/PROVENANCE.md).
 * So a marked launch (ProcRecord.token) exports AERIE_LAUNCH=<token>, which those
 * descendants inherit, and a stop also signals every live same-uid process whose environ
 * holds exactly that token (the escapees), identified by pid and start time:
 *  - its own group, when that group's leader is itself marked: a group can only be joined
 *    from inside its leader's session, which a marked process created, so its members are
 *    that process's descendants (also those that cleared their environment);
 *  - otherwise the pid alone, after the host re-checks its start time.
 * Nothing is ever signalled by name or pattern; records without a token are stopped
 * exactly as before (the group alone).
 */
import type { KillResult, ProcRecord } from '../host.js';
import { groupView, launchIsEmpty, launchView, type LaunchScan, type LaunchView } from './proc-identity.js';
import type { ProcStat } from './proc-stat.js';

export type GroupSignal = 'TERM' | 'KILL';

export interface GroupOps {
  /** Parsed /proc/<pid>/stat of every process (at least the leader and the group's members). */
  scan(): Promise<ProcStat[]>;
  /** One scan of every process plus those marked with token (LaunchScan). */
  scanLaunch(token: string): Promise<LaunchScan>;
  /** Signal every process in group pgid; false when the group no longer exists (ESRCH). */
  signalGroup(pgid: number, signal: GroupSignal): Promise<boolean>;
  /** Signal pid only if it still has startTime; false when it is gone or the pid changed hands. */
  signalProcess(pid: number, startTime: string, signal: GroupSignal): Promise<boolean>;
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

type Target = { kind: 'group'; pgid: number } | { kind: 'process'; pid: number; startTime: string };

async function look(ops: GroupOps, record: ProcRecord): Promise<LaunchView> {
  if (record.token === undefined) return { ...groupView(await ops.scan(), record), escapees: [], marked: [] };
  return launchView(await ops.scanLaunch(record.token), record);
}

/** What to signal for a view: the recorded group, then each escapee's group or the escapee alone. */
export function stopTargets(view: LaunchView, record: ProcRecord): Target[] {
  const targets: Target[] = [];
  const groups = new Set<number>();
  if (!view.leaderRecycled && view.members.length > 0) {
    targets.push({ kind: 'group', pgid: record.pgid });
    groups.add(record.pgid);
  }
  const markedLeaders = new Set(view.marked.filter((m) => m.pgrp === m.pid).map((m) => m.pid));
  for (const e of view.escapees) {
    if (groups.has(e.pgrp)) continue;
    if (e.pgrp > 1 && markedLeaders.has(e.pgrp)) {
      targets.push({ kind: 'group', pgid: e.pgrp });
      groups.add(e.pgrp);
    } else targets.push({ kind: 'process', pid: e.pid, startTime: e.startTime });
  }
  return targets;
}

/** Sends signal to every target; whether any of them still existed. */
async function send(ops: GroupOps, targets: readonly Target[], signal: GroupSignal): Promise<boolean> {
  let delivered = false;
  for (const t of targets) {
    const ok =
      t.kind === 'group' ? await ops.signalGroup(t.pgid, signal) : await ops.signalProcess(t.pid, t.startTime, signal);
    delivered ||= ok;
  }
  return delivered;
}

export async function killGroupWith(ops: GroupOps, record: ProcRecord, timing: KillTiming = {}): Promise<KillResult> {
  const { graceMs = 10_000, pollMs = 100, verifyMs = 5_000 } = timing;
  const signals: string[] = [];
  if (record.pgid <= 1) throw new Error(`refusing to signal process group ${record.pgid}`);

  // Escapees by identity over every scan, so the result can say how many there were.
  const found = new Set<string>();
  let view: LaunchView = { leaderRecycled: false, members: [], escapees: [], marked: [] };
  const scanNow = async (): Promise<boolean> => {
    view = await look(ops, record);
    for (const e of view.escapees) found.add(`${e.pid}:${e.startTime}`);
    return launchIsEmpty(view);
  };
  const waitEmpty = async (waitMs: number): Promise<boolean> => {
    const deadline = ops.now() + waitMs;
    for (;;) {
      if (await scanNow()) return true;
      const left = deadline - ops.now();
      if (left <= 0) return false;
      await ops.sleep(Math.min(pollMs, left));
    }
  };
  const result = (groupEmpty: boolean): KillResult => {
    if (found.size === 0) return { signals, groupEmpty };
    const left = groupEmpty ? 0 : view.escapees.filter((e) => found.has(`${e.pid}:${e.startTime}`)).length;
    return { signals, groupEmpty, escaped: { found: found.size, stopped: found.size - left } };
  };

  if (await scanNow()) return result(true);
  if (!(await send(ops, stopTargets(view, record), 'TERM'))) return result(true);
  signals.push('TERM');
  if (await waitEmpty(graceMs)) return result(true);

  // waitEmpty's last scan just found these processes (identity-checked), so KILL is still aimed at them.
  if (!(await send(ops, stopTargets(view, record), 'KILL'))) return result(true);
  signals.push('KILL');
  return result(await waitEmpty(verifyMs));
}
