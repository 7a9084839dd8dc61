/**
 * LocalHost and processes that leave their launch's group and session, with real
 * processes: a torchrun-like launcher (escape-helpers.ts) whose worker runs in a session
 * of its own. Found by the launch's AERIE_LAUNCH token, never by name; decoys survive.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ProcRecord } from '../../src/hosts/host.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { scanLaunchProcs, signalProcessIfSame } from '../../src/hosts/local/proc.js';
import { environOf, launchedPids, startDecoy, startDecoys, writeLauncher } from './escape-helpers.js';
import { isLive, statOf, stopAll, until } from './proc-helpers.js';
import { useLocalHost } from '../support/local-host.js';

const fx = useLocalHost('aerie-escape-', { each: true });
let dir: string;
let host: LocalHost;
let launcher: string;
/** Processes the test started itself, stopped by their own records afterwards. */
let decoys: ProcRecord[];
/** Escaped pids a failing test may leave behind, killed by pid and start time afterwards. */
let strays: { pid: number; startTime: string }[];

beforeEach(async () => {
  ({ dir, host } = fx);
  launcher = await writeLauncher(dir);
  decoys = [];
  strays = [];
});

afterEach(async () => {
  for (const s of strays) await signalProcessIfSame(s.pid, s.startTime, 'KILL').catch(() => false);
  await stopAll(host, await host.listLaunches());
  await stopAll(host, decoys);
});

async function launch(launchId: string, mode: string) {
  const logPath = join(dir, `${launchId}.log`);
  const { record } = await host.spawnDetached(launchId, ['python3', launcher, mode, dir], { logPath });
  const pids = await launchedPids(logPath, dir);
  for (const pid of [pids.worker, pids.child]) {
    const s = await statOf(pid);
    if (s) strays.push({ pid, startTime: s.startTime });
  }
  return { record, ...pids };
}

async function orphaned(record: ProcRecord) {
  return until('the leader to end with its worker still running', async () => {
    const s = await host.procStatus(record);
    // The exit code is written a moment after the leader dies: wait for it too.
    return s.state === 'orphans' && s.code !== null ? s : null;
  });
}

describe('a launch whose worker starts its own session (torchrun)', () => {
  it('marks the worker, calls the launch orphaned once torchrun is SIGKILLed, and stops the worker while decoys survive', async () => {
    const { record, launcher: torchrun, worker, child } = await launch('r.train.0', 'wait');
    expect(record.token).toMatch(/^r\.train\.0-[0-9a-f]{16}$/);
    const w = (await statOf(worker))!;
    // Outside the recorded group and session: what a group stop alone would miss.
    expect(w.session).toBe(worker);
    expect(w.pgrp).not.toBe(record.pgid);
    expect(await environOf(worker)).toContain(`AERIE_LAUNCH=${record.token}`);
    expect((await statOf(child))!.pgrp).toBe(worker);

    // Decoys: unrelated, a near-miss value, the token only on the command line, the exact token as another user.
    decoys.push(...(await startDecoys(record.token!)));

    // harness-exception: the OOM killer's single-pid kill is the fault under test
    process.kill(torchrun, 'SIGKILL'); // the OOM killer
    expect(await orphaned(record)).toEqual({ state: 'orphans', code: 137, processes: 2, escaped: 2 });
    expect(await isLive(worker)).toBe(true);

    expect(await host.killGroup(record, { graceMs: 5000 })).toEqual({
      signals: ['TERM'],
      groupEmpty: true,
      escaped: { found: 2, stopped: 2 },
    });
    expect(await isLive(worker)).toBe(false);
    expect(await isLive(child)).toBe(false);
    for (const d of decoys) expect(await isLive(d.pid)).toBe(true);
    expect(await host.procStatus(record)).toEqual({ state: 'exited', code: 137 });
  });

  it('stops a live launch and its escaped worker together', async () => {
    const { record, launcher: torchrun, worker } = await launch('r.train.1', 'wait');
    expect(await host.procStatus(record)).toEqual({ state: 'alive' });
    expect(await host.killGroup(record, { graceMs: 5000 })).toEqual({
      signals: ['TERM'],
      groupEmpty: true,
      escaped: { found: 2, stopped: 2 },
    });
    expect(await isLive(torchrun)).toBe(false);
    expect(await isLive(worker)).toBe(false);
  });

  it('uses KILL on an escaped worker that ignores TERM', async () => {
    const { record, launcher: torchrun, worker, child } = await launch('r.train.2', 'stubborn');
    // harness-exception: the OOM killer's single-pid kill is the fault under test
    process.kill(torchrun, 'SIGKILL'); // the OOM killer: the launcher's pid alone dies (the fault under test), its escaped worker stays
    await orphaned(record);
    expect(await host.killGroup(record, { graceMs: 400 })).toEqual({
      signals: ['TERM', 'KILL'],
      groupEmpty: true,
      escaped: { found: 2, stopped: 2 },
    });
    expect(await isLive(worker)).toBe(false);
    expect(await isLive(child)).toBe(false);
  });

  it('signals an escapee alone when the leader of its group is gone', async () => {
    const { record, launcher: torchrun, worker, child } = await launch('r.train.3', 'leaderless');
    await until('the worker to exit', async () => !(await isLive(worker)));
    // harness-exception: the OOM killer's single-pid kill is the fault under test
    process.kill(torchrun, 'SIGKILL'); // the OOM killer: the launcher's pid alone dies (the fault under test), its escaped worker stays
    // Only the child is left, in a group whose leader (the worker) is gone.
    expect(await orphaned(record)).toEqual({ state: 'orphans', code: 137, processes: 1, escaped: 1 });
    const scan = await scanLaunchProcs(record.token!);
    expect(scan.marked.map((m) => m.pid)).toEqual([child]);
    expect(await host.killGroup(record, { graceMs: 5000 })).toEqual({
      signals: ['TERM'],
      groupEmpty: true,
      escaped: { found: 1, stopped: 1 },
    });
    expect(await isLive(child)).toBe(false);
  });
});

describe('signalProcessIfSame', () => {
  it('refuses a pid whose start time is not the recorded one (a recycled pid), and signals the right one', async () => {
    const d = await startDecoy(['sleep', '300'], {});
    decoys.push(d);
    expect(await signalProcessIfSame(d.pid, String(Number(d.startTime) + 1), 'KILL')).toBe(false);
    expect(await isLive(d.pid)).toBe(true);
    expect(await signalProcessIfSame(d.pid, d.startTime, 'TERM')).toBe(true);
    await until('the decoy to end', async () => !(await isLive(d.pid)));
    expect(await signalProcessIfSame(d.pid, d.startTime, 'TERM')).toBe(false);
  });
});
