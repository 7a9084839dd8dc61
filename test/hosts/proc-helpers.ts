/**
 * Test helpers (not a test file): poll with a deadline, look at process groups, and stop
 * what a test started by its recorded pgid — never by name.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Host, ProcRecord } from '../../src/hosts/host.js';
import { isDead, parseProcStat, type ProcStat } from '../../src/hosts/protocol/proc-stat.js';
import { scanProcStats } from '../../src/hosts/local/proc.js';

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function statOf(pid: number): Promise<ProcStat | null> {
  try {
    return parseProcStat(await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

export async function isLive(pid: number): Promise<boolean> {
  const s = await statOf(pid);
  return s !== null && !isDead(s);
}

/** Live members of process group pgid. */
export async function groupMembers(pgid: number): Promise<ProcStat[]> {
  return (await scanProcStats()).filter((s) => s.pgrp === pgid && !isDead(s));
}

/** Processes whose command line mentions needle (to count wrappers of one launch). */
export async function processesMentioning(needle: string): Promise<number[]> {
  const pids: number[] = [];
  for (const s of await scanProcStats()) {
    if (isDead(s)) continue;
    try {
      if ((await readFile(`/proc/${s.pid}/cmdline`, 'utf8')).includes(needle)) pids.push(s.pid);
    } catch {
      // gone
    }
  }
  return pids;
}

/** A record for a group leader the test started itself, identified by pid and start time. */
export function recordOf(pid: number, startTime: string, launchId = 'test-helper'): ProcRecord {
  return {
    launchId,
    pid,
    pgid: pid,
    startTime,
    argvHash: '',
    argv: [],
    logPath: '/dev/null',
    exitPath: '/nonexistent/exit',
    startedAt: new Date().toISOString(),
    host: 'test',
  };
}

/** The record of a group leader the test just started and knows to be alive. */
export async function recordOfLeader(pid: number, launchId = 'test-helper'): Promise<ProcRecord> {
  const s = await statOf(pid);
  if (!s || s.pgrp !== pid) throw new Error(`process ${pid} is gone or leads no group`);
  return recordOf(pid, s.startTime, launchId);
}

/** Start an unrelated process in its own group (not through aerie) and return its record. Hand-built on purpose: the host's process-group killer must leave it alone. */
export async function startUnrelated(argv: string[]): Promise<ProcRecord> {
  const child = spawn(argv[0], argv.slice(1), { detached: true, stdio: 'ignore' });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  child.unref();
  return recordOfLeader(child.pid!, 'unrelated');
}

/** Stop every given record through the host (identity-checked), quickly. */
export async function stopAll(host: Host, records: readonly ProcRecord[]): Promise<void> {
  for (const r of records) await host.killGroup(r, { graceMs: 300 });
}
