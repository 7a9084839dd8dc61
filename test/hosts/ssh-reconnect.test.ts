/**
 * The SSH link drops under aerie (the per-connection sshd process is killed, found as a
 * child of the recorded sshd pid): operations in flight reconnect and finish, a long exec
 * runs exactly once, and a forwarded port keeps working.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { SshHost } from '../../src/hosts/ssh/ssh-host.js';
import { startFakeServer } from '../support/fake-server.js';
import { useSshFixture, type SshFixture } from '../support/ssh-fixture.js';
import { until } from './proc-helpers.js';

const ssh = useSshFixture();
let fx: SshFixture;
let host: SshHost;

beforeAll(() => {
  fx = ssh.fx;
  host = fx.host();
});

/** Kill the sshd process serving our connection once it exists; returns the pids killed. */
async function dropWhenConnected(): Promise<number[]> {
  await until('a connection to the test sshd', async () => (await fx.sshd.sessionPids()).length > 0);
  return fx.sshd.dropConnections();
}

describe('dropped connections', () => {
  it('a long exec survives the sshd session being killed, and its command runs once', async () => {
    const count = `${fx.dir}/runs.txt`;
    const running = host.exec(['sh', '-c', 'echo run >> "$1"; sleep 2; echo finished', 'sh', count]);
    await until('the command to start', async () => (await host.stat(count)) !== null, 10_000);
    const drops = host.link.stats.drops;
    expect((await dropWhenConnected()).length).toBeGreaterThan(0);
    const r = await running;
    expect(r).toMatchObject({ code: 0, stdout: 'finished\n' });
    expect((await host.readFile(count)).toString()).toBe('run\n');
    expect(host.link.stats.drops).toBeGreaterThan(drops);
  });

  it('polling a launched process keeps working across drops', async () => {
    const log = `${host.workdir}/poll.log`;
    const { record } = await host.spawnDetached(
      'poll-1',
      ['sh', '-c', 'for i in 1 2 3 4 5 6 7 8 9 10; do echo line $i; sleep 0.5; done'],
      { logPath: log },
    );
    const connectsBefore = host.link.stats.connects;
    let offset = 0;
    let text = '';
    let dropped = 0;
    for (let i = 0; ; i++) {
      const chunk = await host.tailFrom(log, offset);
      offset = chunk.offset;
      text += chunk.data;
      const status = await host.procStatus(record);
      if (status.state !== 'alive') {
        expect(status).toEqual({ state: 'exited', code: 0 });
        break;
      }
      if (i === 1 || i === 3) dropped += (await dropWhenConnected()).length;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(dropped).toBeGreaterThanOrEqual(2);
    expect(host.link.stats.connects).toBeGreaterThanOrEqual(connectsBefore + 2);
    expect(text.trim().split('\n')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((i) => `line ${i}`));
  });

  it('a forwarded port answers before and after a drop at the same base URL', async () => {
    const server = await startFakeServer((_body, res) => res.end('ok'));
    const port = Number(new URL(server.baseUrl).port);
    try {
      const base = await host.httpBase(port);
      expect(await (await fetch(`${base}/`)).text()).toBe('ok');
      await dropWhenConnected();
      const again = await until(
        'the forward to answer again',
        async () =>
          fetch(`${base}/`, { headers: { connection: 'close' } }).then(
            (r) => r.text(),
            () => false,
          ),
        20_000,
      );
      expect(again).toBe('ok');
      expect(await host.httpBase(port)).toBe(base);
    } finally {
      await server.close();
    }
  });
});
