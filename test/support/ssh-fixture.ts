/**
 * One test sshd plus what a client needs to reach it the way a researcher would: a key,
 * a known_hosts file holding the server's key, and an ssh config with an alias for it.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { SshHost, type SshHostOptions } from '../../src/hosts/ssh/ssh-host.js';
import { stopRecordedLaunches } from './cleanup.js';
import { makeKey, sshConfigText, startSshd, type KeyPair, type TestSshd } from './sshd.js';

export interface SshFixture {
  dir: string;
  sshd: TestSshd;
  clientKey: KeyPair;
  knownHosts: string;
  sshConfig: string;
  /** The alias the ssh config gives the test sshd. */
  alias: string;
  host(opts?: Partial<SshHostOptions>): SshHost;
  stop(): Promise<void>;
}

export async function startSshFixture(): Promise<SshFixture> {
  const dir = await mkdtemp(join(tmpdir(), 'aerie-sshfx-'));
  const clientKey = await makeKey(dir, 'client_ed25519');
  const sshd = await startSshd({ authorizedKeys: [clientKey.publicLine] });
  const knownHosts = join(dir, 'known_hosts');
  await writeFile(knownHosts, `${sshd.knownHostsLine}\n`);
  const alias = 'aerie-test-gpu';
  const sshConfig = join(dir, 'ssh_config');
  await writeFile(
    sshConfig,
    sshConfigText({
      [alias]: {
        HostName: '127.0.0.1',
        Port: sshd.port,
        User: 'root',
        IdentityFile: clientKey.path,
        IdentitiesOnly: 'yes',
        UserKnownHostsFile: knownHosts,
      },
    }),
  );
  const hosts: SshHost[] = [];
  return {
    dir,
    sshd,
    clientKey,
    knownHosts,
    sshConfig,
    alias,
    host(opts = {}) {
      const h = new SshHost({
        name: 'gpu-test',
        workdir: join(dir, 'work'),
        ssh: { host: alias, 'config-file': sshConfig },
        tuning: { keepaliveIntervalMs: 2000, retryBudgetMs: 30_000 },
        ...opts,
      });
      hosts.push(h);
      return h;
    },
    async stop() {
      await Promise.all(hosts.map((h) => h.close().catch(() => undefined)));
      await sshd.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The file's ssh fixture with its own beforeAll/afterAll: in afterAll whatever a run left
 * running on the (loopback) host under the fixture's folder is stopped by its launch record,
 * then the sshd and the folder go. Read `.fx` inside a hook or test.
 */
export function useSshFixture(): { readonly fx: SshFixture } {
  let fx: SshFixture | undefined;
  beforeAll(async () => {
    fx = await startSshFixture();
  }, 120_000);
  afterAll(async () => {
    if (fx) await stopRecordedLaunches(fx.dir);
    await fx?.stop();
  });
  return {
    get fx() {
      if (!fx) throw new Error('useSshFixture(): the fixture is started in beforeAll; read it inside a hook or test');
      return fx;
    },
  };
}
