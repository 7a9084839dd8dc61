/**
 * hosts.<h>.shares-files-with is a claim preflight checks rather than trusts: the target
 * writes a file in the run folder and the other host must read it back. Here the other host
 * is reached through a real sshd; in one case that sshd lives in a mount namespace of its own
 * with a tmpfs over the shared workdir, so the claim is false the way it is on a cluster whose
 * second node never mounted the share. The same config through a plain sshd passes.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPreflight } from '../../src/activities/preflight.js';
import { HostPool } from '../../src/hosts/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { useLocalHost } from '../support/local-host.js';
import { makeKey, sshConfigText, startSshd, type TestSshd } from '../support/sshd.js';

// The target host's workdir, which gpu-b claims to share (the same path there).
const local = useLocalHost('aerie-sharedfs-', {
  sub: 'shared-work',
  setup: (dir) => mkdir(join(dir, 'shared-work')).then(() => undefined),
});
let dir: string;
let workdir: string;
const sshds: TestSshd[] = [];
let sshConfig: string;
const pool = new HostPool();

beforeAll(async () => {
  dir = local.dir;
  workdir = local.host.workdir;
  const key = await makeKey(dir, 'client_ed25519');
  const plain = await startSshd({ authorizedKeys: [key.publicLine] });
  sshds.push(plain);
  const apart = await startSshd({ authorizedKeys: [key.publicLine], privateTmpfsAt: workdir });
  sshds.push(apart);
  const knownHosts = join(dir, 'known_hosts');
  await writeFile(knownHosts, `${plain.knownHostsLine}\n${apart.knownHostsLine}\n`);
  const block = (port: number) => ({
    HostName: '127.0.0.1',
    Port: port,
    User: 'root',
    IdentityFile: key.path,
    IdentitiesOnly: 'yes',
    UserKnownHostsFile: knownHosts,
  });
  sshConfig = join(dir, 'ssh_config');
  await writeFile(sshConfig, sshConfigText({ 'node-shared': block(plain.port), 'node-apart': block(apart.port) }));
}, 60_000);

afterAll(async () => {
  await pool.closeAll();
  for (const s of sshds) await s.stop();
});

/** The demo with one extraction server on gpu-b, which claims to share the target's files. */
async function preflightVia(alias: string) {
  const port = await freePort();
  const config = demoConfig(workdir, await freePort(), (c) => {
    c.hosts['gpu-b'] = {
      kind: 'ssh',
      ssh: { host: alias, 'config-file': sshConfig },
      workdir,
      'shares-files-with': 'local',
    } as (typeof c.hosts)[string];
    const e = c.stages.extract;
    if (e.driver !== 'patched-server') throw new Error('the demo extracts with the patched server');
    e.servers = [{ host: 'gpu-b', port }];
  });
  return runPreflight(local.host, config, `sharedfs-${alias}`, (c, name) => pool.get(c, name));
}

const sharing = (lines: string[]) => lines.filter((l) => l.includes('shares-files-with') || l.includes('sees local'));

describe('preflight of an extraction server on a host that says it shares the target files', () => {
  it('refuses a host that sees its own folder at the same path, naming the field and the fix', async () => {
    const report = await preflightVia('node-apart');
    expect(sharing(report.problems)).toEqual([
      expect.stringMatching(
        /^hosts\.gpu-b\.shares-files-with: gpu-b does not see .*\/runs\/sharedfs-node-apart\/\.aerie-shared-gpu-b, which local just wrote \(no such file there\)\. Fix: mount the shared filesystem at the same path on both hosts, or run this extraction server on local$/,
      ),
    ]);
    expect(sharing(report.checks)).toEqual([]);
  }, 120_000);

  it('accepts the same config when the host does see the folder', async () => {
    const report = await preflightVia('node-shared');
    expect(sharing(report.problems)).toEqual([]);
    expect(sharing(report.checks)).toEqual([expect.stringMatching(/sees local's run folder .*sharedfs-node-shared/)]);
  }, 120_000);
});
