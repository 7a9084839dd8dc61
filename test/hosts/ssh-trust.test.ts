/**
 * Who aerie trusts: host keys checked against known_hosts (unknown and changed keys are
 * refused, naming host and fingerprint; trust on first use only when configured), keys
 * offered for login, and ProxyJump through a second real sshd.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SshTrustError } from '../../src/hosts/ssh/connect.js';
import { SshHost, type SshHostOptions } from '../../src/hosts/ssh/ssh-host.js';
import { useSshFixture, type SshFixture } from '../support/ssh-fixture.js';
import { makeKey, sshConfigText, startSshd, type TestSshd } from '../support/sshd.js';

const ssh = useSshFixture();
let fx: SshFixture;
let jump: TestSshd;
const opened: SshHost[] = [];

beforeAll(async () => {
  fx = ssh.fx;
  jump = await startSshd({ authorizedKeys: [fx.clientKey.publicLine] });
});

afterAll(async () => {
  await Promise.all(opened.map((h) => h.close()));
  await jump?.stop();
});

let n = 0;
/** A host whose ssh config is `blocks` (the first block is the one connected to). */
async function hostWith(
  blocks: Record<string, Record<string, string | number>>,
  ssh: Partial<SshHostOptions['ssh']> = {},
): Promise<SshHost> {
  const path = join(fx.dir, `case-${++n}.ssh_config`);
  await writeFile(path, sshConfigText(blocks));
  const h = new SshHost({
    name: `case-${n}`,
    workdir: join(fx.dir, 'work'),
    ssh: { host: Object.keys(blocks)[0]!, 'config-file': path, ...ssh },
    tuning: { retryBudgetMs: 3_000 },
  });
  opened.push(h);
  return h;
}

function target(knownHosts: string, more: Record<string, string | number> = {}): Record<string, string | number> {
  return {
    HostName: '127.0.0.1',
    Port: fx.sshd.port,
    User: 'root',
    IdentityFile: fx.clientKey.path,
    IdentitiesOnly: 'yes',
    UserKnownHostsFile: knownHosts,
    ...more,
  };
}

describe('host keys', () => {
  it('refuses an unknown host key by default, naming the host and its SHA256 fingerprint', async () => {
    const empty = join(fx.dir, 'empty_known_hosts');
    await writeFile(empty, '');
    const h = await hostWith({ gpu: target(empty) });
    const err = (await h.exec(['true']).then(
      () => new Error('connected'),
      (e: unknown) => e,
    )) as Error;
    expect(err).toBeInstanceOf(SshTrustError);
    expect(err.message).toContain(`[127.0.0.1]:${fx.sshd.port}`);
    expect(err.message).toContain(fx.sshd.hostKey.fingerprint);
    expect(err.message).toMatch(/not in known_hosts/);
    expect(await readFile(empty, 'utf8')).toBe('');
  });

  it('refuses a changed host key, even with accept-new', async () => {
    const other = await makeKey(fx.dir, 'impostor');
    const stale = join(fx.dir, 'stale_known_hosts');
    await writeFile(stale, `[127.0.0.1]:${fx.sshd.port} ${other.publicLine.split(' ').slice(0, 2).join(' ')}\n`);
    for (const strict of ['yes', 'accept-new'] as const) {
      const h = await hostWith({ gpu: target(stale) }, { 'strict-host-key-checking': strict });
      const err = (await h.exec(['true']).then(
        () => new Error('connected'),
        (e: unknown) => e,
      )) as Error;
      expect(err).toBeInstanceOf(SshTrustError);
      expect(err.message).toMatch(/CHANGED/);
      expect(err.message).toContain(fx.sshd.hostKey.fingerprint);
      expect(err.message).toContain(`${stale}:1`);
    }
  });

  it('trusts a new host on first use only when configured, and records its key', async () => {
    const fresh = join(fx.dir, 'tofu_known_hosts');
    const h = await hostWith({ gpu: target(fresh) }, { 'strict-host-key-checking': 'accept-new' });
    expect((await h.exec(['echo', 'hi'])).stdout).toBe('hi\n');
    expect(h.link.lastKeys).toEqual([
      expect.objectContaining({ fingerprint: fx.sshd.hostKey.fingerprint, added: true }),
    ]);
    expect((await readFile(fresh, 'utf8')).trim()).toBe(fx.sshd.knownHostsLine);
    // The recorded key now passes strict checking.
    const strict = await hostWith({ gpu: target(fresh) });
    expect((await strict.exec(['echo', 'again'])).stdout).toBe('again\n');
    expect(strict.link.lastKeys[0]).toMatchObject({ added: false });
  });
});

describe('login', () => {
  it('says which keys were refused without printing any key material', async () => {
    const stranger = await makeKey(fx.dir, 'stranger');
    const h = await hostWith({ gpu: target(fx.knownHosts, { IdentityFile: stranger.path }) });
    const err = (await h.exec(['true']).then(
      () => new Error('connected'),
      (e: unknown) => e,
    )) as Error;
    expect(err).toBeInstanceOf(SshTrustError);
    expect(err.message).toContain(stranger.path);
    const privateKey = await readFile(stranger.path, 'utf8');
    const body = privateKey
      .split('\n')
      .filter((l) => l && !l.startsWith('-----'))
      .join('');
    expect(err.message).not.toContain(body.slice(0, 40));
  });
});

describe('ProxyJump', () => {
  it('reaches the target through a second sshd named in the ssh config', async () => {
    const knownBoth = join(fx.dir, 'both_known_hosts');
    await writeFile(knownBoth, `${fx.sshd.knownHostsLine}\n${jump.knownHostsLine}\n`);
    const h = await hostWith({
      gpu: target(knownBoth, { ProxyJump: 'bastion' }),
      bastion: {
        HostName: '127.0.0.1',
        Port: jump.port,
        User: 'root',
        IdentityFile: fx.clientKey.path,
        IdentitiesOnly: 'yes',
        UserKnownHostsFile: knownBoth,
      },
    });
    expect(await h.describe()).toBe(`root@127.0.0.1:${fx.sshd.port} via root@127.0.0.1:${jump.port}`);
    expect((await h.exec(['echo', 'via the bastion'])).stdout).toBe('via the bastion\n');
    expect(h.link.lastKeys.map((k) => k.fingerprint)).toEqual([jump.hostKey.fingerprint, fx.sshd.hostKey.fingerprint]);
    expect((await jump.sessionPids()).length).toBeGreaterThan(0);
    await h.close();
  });
});
