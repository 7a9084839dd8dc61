/**
 * launchServer's own guards, called directly on a real LocalHost with real simulator
 * processes (they use no activity context): a held port is refused before anything is
 * launched, a live launch of the same command is re-attached, one with another command
 * line is replaced. And the "is it ours?" check on a 200: the port's holder must be in our
 * process group.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, describe, expect, it } from 'vitest';
import { confirmOurs } from '../../src/activities/server-watch.js';
import { serverActivities, type ServerLaunch } from '../../src/activities/server.js';
import type { Host } from '../../src/hosts/host.js';
import { HostPool } from '../../src/hosts/index.js';
import type { SglangClient } from '../../src/sglang/client.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { waitUntil } from '../support/temporal.js';
import { faultConfig, groupHasMembers, launchRecords } from './harness.js';
import { useWorkdir } from '../support/workdir.js';
import { startSim, stopSim } from '../support/sim.js';

const tmp = useWorkdir('aerie-launch-guard-');
const hosts = new HostPool();
const acts = serverActivities({ hosts });
const started: { host: Host; launch: ServerLaunch }[] = [];

// Registered after the folder's, so it runs first; the folder's afterAll then stops whatever is left by its launch record.
afterAll(async () => {
  // Stop every server these tests launched, by its recorded group.
  for (const s of started) await s.host.killGroup(s.launch.record, { graceMs: 2000 }).catch(() => undefined);
  await hosts.closeAll();
});

async function failureOf(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

describe('launchServer guards', () => {
  it('refuses a port another process holds, names it, and launches nothing', async () => {
    const workdir = join(tmp.path, 'held');
    // A simulator aerie did not launch, in a process group of its own, answering /health.
    const stale = await startSim({ AERIE_SIM_TIME_SCALE: '0.005' });
    const port = Number(new URL(stale.baseUrl).port);
    try {
      const config = faultConfig(workdir, port, {});
      const err = await failureOf(acts.launchServer({ runId: 'held', config, role: 'generate' }));
      expect(err.type).toBe('PortInUseError');
      expect(err.nonRetryable).toBe(true);
      expect(err.message).toMatch(
        new RegExp(`^port ${port} on local is already held by pid ${stale.child.pid} \\(.*aerie-sim\\.mjs sglang`),
      );
      expect(await launchRecords(workdir)).toEqual([]);
    } finally {
      await stopSim(stale);
    }
  }, 60_000);

  it('re-attaches a live launch of the same command and replaces one whose command line changed', async () => {
    const workdir = join(tmp.path, 'reattach');
    const config = faultConfig(workdir, await freePort(), { AERIE_SIM_TIME_SCALE: '0.5' });
    const first = await acts.launchServer({ runId: 'ra', config, role: 'generate' });
    started.push({ host: hosts.get(config), launch: first });
    expect(first.reattached).toBe(false);
    const again = await acts.launchServer({ runId: 'ra', config, role: 'generate' });
    expect(again.reattached).toBe(true);
    expect(again.launchId).toBe(first.launchId);
    expect(again.pid).toBe(first.pid);
    expect(await launchRecords(workdir)).toEqual(['ra.server-generate.0']);

    config.server['extra-args'] = ['--decode-log-interval', '10'];
    const changed = await acts.launchServer({ runId: 'ra', config, role: 'generate' });
    started.push({ host: hosts.get(config), launch: changed });
    expect(changed.launchId).toBe('ra.server-generate.1');
    expect(changed.notes.join('\n')).toMatch(/stopped ra\.server-generate\.0 \(pid \d+\): it ran another command line/);
    expect(await groupHasMembers(first.pgid)).toBe(false);
    expect(await launchRecords(workdir)).toEqual(['ra.server-generate.0', 'ra.server-generate.1']);
  }, 60_000);
});

describe('a launch whose record was never written (link or worker lost right after the start)', () => {
  it('is adopted by the retried launchServer although it already holds the port: one server, same pid', async () => {
    const workdir = join(tmp.path, 'unrecorded');
    const config = faultConfig(workdir, await freePort(), {});
    const first = await acts.launchServer({ runId: 'ur', config, role: 'generate' });
    started.push({ host: hosts.get(config), launch: first });
    await waitUntil(
      async () => (await fetch(`http://127.0.0.1:${first.port}/health`).catch(() => null))?.status === 200,
      'the server on its port',
      30_000,
    );
    // What a drop between the wrapper's start and the record write leaves: the pid file only.
    await rm(join(workdir, '.aerie', 'procs', 'ur.server-generate.0.json'));
    expect(await launchRecords(workdir)).toEqual([]);

    const retried = await acts.launchServer({ runId: 'ur', config, role: 'generate' });
    expect(retried.reattached).toBe(true);
    expect(retried.launchId).toBe('ur.server-generate.0');
    expect(retried.pid).toBe(first.pid);
    expect(await launchRecords(workdir)).toEqual(['ur.server-generate.0']);
  }, 60_000);
});

describe('confirmOurs: a 200 counts only from our process group', () => {
  const launch = {
    role: 'deploy',
    port: 30000,
    pid: 500,
    pgid: 500,
    modelPath: '/m',
    tpSize: 1,
  } as unknown as ServerLaunch;
  const hostWith = (holderPid: number, holderPgid: number): Host =>
    ({
      name: 'gpu-a',
      portHolder: async () => ({
        listening: true,
        pid: holderPid,
        command: 'python3 -m sglang.launch_server --model-path /m',
      }),
      exec: async () => ({
        code: 0,
        signal: null,
        stdout: `${holderPid} (python3) S 1 ${holderPgid} ${holderPgid} 0 -1 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0\n`,
        stderr: '',
      }),
    }) as unknown as Host;
  const client = (info: Record<string, unknown>) => ({ serverInfo: async () => info }) as unknown as SglangClient;
  const ours = { model_path: '/m', port: 30000, tp_size: 1, speculative_algorithm: null };

  it('refuses a holder outside our group even when server_info matches, naming it', async () => {
    const err = await failureOf(confirmOurs(hostWith(777, 700), client(ours), launch, new AbortController().signal));
    expect(err.type).toBe('PortInUseError');
    expect(err.message).toBe(
      'port 30000 on gpu-a answers, but the answer comes from pid 777 (python3 -m sglang.launch_server --model-path /m), not from the deploy server ' +
        'aerie launched (pid 500, process group 500); it is not ready and aerie will not stop that process',
    );
  });

  it('accepts our group with matching server_info, and refuses a mismatch with what was launched', async () => {
    await expect(
      confirmOurs(hostWith(512, 500), client(ours), launch, new AbortController().signal),
    ).resolves.toBeUndefined();
    const err = await failureOf(
      confirmOurs(hostWith(512, 500), client({ ...ours, model_path: '/other' }), launch, new AbortController().signal),
    );
    expect(err.type).toBe('ServerMismatch');
    expect(err.message).toMatch(/server_info says model_path=\/other, we launched \/m/);
  });
});
