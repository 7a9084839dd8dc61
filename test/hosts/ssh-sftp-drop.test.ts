/**
 * SFTP operations in flight when the SSH session is cut (sshd's per-connection process
 * killed) are retried on a new connection and finish. ssh2 sometimes never answers a
 * request whose channel died, which used to leave such an operation waiting forever; the
 * hang showed within a few rounds of this loop.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { SshHost } from '../../src/hosts/ssh/ssh-host.js';
import { useSshFixture, type SshFixture } from '../support/ssh-fixture.js';

const ssh = useSshFixture();
let fx: SshFixture;
let host: SshHost;

beforeAll(async () => {
  fx = ssh.fx;
  host = fx.host();
  await host.mkdirp(host.workdir);
});

describe('SFTP under a cut session', () => {
  it('stats and atomic writes in flight during a cut all settle, and the writes land', async () => {
    for (let round = 0; round < 12; round++) {
      const path = `${host.workdir}/written-${round}`;
      const ops = [
        ...Array.from({ length: 40 }, (_, i) => host.stat(`${host.workdir}/absent-${i}`)),
        host.writeFileAtomic(path, `round ${round}\n`),
      ];
      const cut = fx.sshd.dropConnections();
      const settled = await Promise.race([
        Promise.allSettled(ops).then((r) => r.map((x) => x.status)),
        new Promise<'stuck'>((r) => setTimeout(() => r('stuck'), 45_000)),
      ]);
      await cut;
      expect(settled, `round ${round}`).toEqual(ops.map(() => 'fulfilled'));
      expect((await host.readFile(path)).toString()).toBe(`round ${round}\n`);
    }
  }, 300_000);
});
