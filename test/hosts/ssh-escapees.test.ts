/**
 * SshHost and processes that leave their launch's group and session, against the real test
 * sshd (on loopback, so the test can look at /proc itself): the remote scan finds the
 * torchrun-like launcher's worker by its AERIE_LAUNCH token in one exec, and a stop ends it
 * while decoys survive.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProcRecord } from '../../src/hosts/host.js';
import { PROCESS_SIGNAL } from '../../src/hosts/protocol/launch-script.js';
import { signalProcessIfSame } from '../../src/hosts/local/proc.js';
import type { SshHost } from '../../src/hosts/ssh/ssh-host.js';
import { useSshFixture, type SshFixture } from '../support/ssh-fixture.js';
import { environOf, launchedPids, startDecoy, startDecoys, writeLauncher } from './escape-helpers.js';
import { isLive, statOf, stopAll, until } from './proc-helpers.js';

const ssh = useSshFixture();
let fx: SshFixture;
let host: SshHost;
let launcher: string;
const decoys: ProcRecord[] = [];
const strays: { pid: number; startTime: string }[] = [];

beforeAll(async () => {
  fx = ssh.fx;
  host = fx.host();
  launcher = await writeLauncher(fx.dir);
});

afterAll(async () => {
  for (const s of strays) await signalProcessIfSame(s.pid, s.startTime, 'KILL').catch(() => false);
  if (host) await stopAll(host, await host.listLaunches().catch(() => []));
  if (host) await stopAll(host, decoys);
});

describe('escaped processes over SSH', () => {
  it('finds the worker of a SIGKILLed torchrun in its own session, reports orphans, and stops it while decoys survive', async () => {
    const out = join(fx.dir, 'run-0');
    await mkdir(out);
    const logPath = `${host.workdir}/train-0.log`;
    const { record } = await host.spawnDetached('r.train.0', ['python3', launcher, 'wait', out], { logPath });
    expect(record.token).toMatch(/^r\.train\.0-[0-9a-f]{16}$/);
    const { launcher: torchrun, worker, child } = await launchedPids(logPath, out);
    for (const pid of [worker, child]) strays.push({ pid, startTime: (await statOf(pid))!.startTime });
    expect((await statOf(worker))!.session).toBe(worker);
    expect(await environOf(worker)).toContain(`AERIE_LAUNCH=${record.token}`);

    decoys.push(...(await startDecoys(record.token!)));

    expect(await host.procStatus(record)).toEqual({ state: 'alive' });
    // harness-exception: the OOM killer's single-pid kill is the fault under test
    process.kill(torchrun, 'SIGKILL'); // the OOM killer: the launcher's pid alone dies (the fault under test), its escaped worker stays
    expect(
      // The leader's exit code is written a moment after it dies: orphans with no code yet is
      // on the way to the state under test, not the state itself.
      await until("orphans with the leader's exit code", async () => {
        const s = await host.procStatus(record);
        return s.state === 'orphans' && s.code !== null ? s : null;
      }),
    ).toEqual({ state: 'orphans', code: 137, processes: 2, escaped: 2 });

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

  it('signals an escapee alone over SSH when the leader of its group is gone', async () => {
    const out = join(fx.dir, 'run-1');
    await mkdir(out);
    const logPath = `${host.workdir}/train-1.log`;
    const { record } = await host.spawnDetached('r.train.1', ['python3', launcher, 'leaderless', out], { logPath });
    const { launcher: torchrun, worker, child } = await launchedPids(logPath, out);
    strays.push({ pid: child, startTime: (await statOf(child))!.startTime });
    await until('the worker to exit', async () => !(await isLive(worker)));
    // harness-exception: the OOM killer's single-pid kill is the fault under test
    process.kill(torchrun, 'SIGKILL'); // the OOM killer: the launcher's pid alone dies (the fault under test), its escaped worker stays
    expect(
      // The leader's exit code is written a moment after it dies: orphans with no code yet is
      // on the way to the state under test, not the state itself.
      await until("orphans with the leader's exit code", async () => {
        const s = await host.procStatus(record);
        return s.state === 'orphans' && s.code !== null ? s : null;
      }),
    ).toEqual({ state: 'orphans', code: 137, processes: 1, escaped: 1 });
    expect(await host.killGroup(record, { graceMs: 5000 })).toEqual({
      signals: ['TERM'],
      groupEmpty: true,
      escaped: { found: 1, stopped: 1 },
    });
    expect(await isLive(child)).toBe(false);
  });

  it('the remote single-process signal refuses a pid whose start time differs (recycled), and signals the right one', async () => {
    const d = await startDecoy(['sleep', '300'], {});
    decoys.push(d);
    const run = (startTime: string) =>
      host.exec(['/bin/sh', '-c', PROCESS_SIGNAL, 'sh', String(d.pid), startTime, 'TERM']);
    expect((await run(String(Number(d.startTime) + 1))).code).toBe(3);
    expect(await isLive(d.pid)).toBe(true);
    expect((await run(d.startTime)).code).toBe(0);
    await until('the decoy to end', async () => !(await isLive(d.pid)));
    expect((await run(d.startTime)).code).toBe(3);
  });
});
