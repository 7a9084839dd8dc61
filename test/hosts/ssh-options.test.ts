/** Resolving an ssh host entry against an ssh config, the way OpenSSH does. */
import { describe, expect, it } from 'vitest';
import {
  describeEndpoint,
  inlineIncludes,
  parseJumpSpec,
  resolveEndpoint,
  SshConfigProblem,
} from '../../src/hosts/ssh/options.js';

const ctx = (text: string | null, env: Record<string, string> = {}) => ({
  sshConfigText: text,
  home: '/home/ana',
  localUser: 'ana',
  env,
});

const CONFIG = `
Host gpu-a
  HostName 192.0.2.10
  Port 2222
  User researcher
  IdentityFile ~/.ssh/gpu_%r
  ProxyJump bastion
  UserKnownHostsFile ~/.ssh/known_gpu

Host bastion
  HostName bastion.example.org
  User jump
  IdentitiesOnly yes

Host hidden
  HostName 192.0.2.20
  HostKeyAlias hidden-key
  ProxyCommand nc %h %p

Host *
  IdentityFile ~/.ssh/id_ed25519
  IdentityAgent none
`;

describe('resolveEndpoint', () => {
  it('applies HostName, Port, User, IdentityFile, UserKnownHostsFile and ProxyJump from the alias', () => {
    const e = resolveEndpoint({ host: 'gpu-a' }, ctx(CONFIG, { SSH_AUTH_SOCK: '/run/agent.sock' }));
    expect(e).toMatchObject({
      alias: 'gpu-a',
      hostname: '192.0.2.10',
      port: 2222,
      user: 'researcher',
      identityFiles: ['/home/ana/.ssh/gpu_researcher', '/home/ana/.ssh/id_ed25519'],
      knownHostsFiles: ['/home/ana/.ssh/known_gpu'],
      hostKeyName: '192.0.2.10',
      agent: null,
    });
    expect(e.jumps).toHaveLength(1);
    expect(e.jumps[0]).toMatchObject({ hostname: 'bastion.example.org', port: 22, user: 'jump', identitiesOnly: true });
    expect(describeEndpoint(e)).toBe('researcher@192.0.2.10:2222 via jump@bastion.example.org:22');
  });

  it('lets the aerie config override the ssh config, and works without one', () => {
    const e = resolveEndpoint(
      {
        host: 'gpu-a',
        user: 'root',
        port: 22,
        'identity-file': '~/keys/k',
        'proxy-jump': 'none',
        'known-hosts-file': '/etc/aerie/kh',
      },
      ctx(CONFIG),
    );
    expect(e).toMatchObject({
      user: 'root',
      port: 22,
      identityFiles: ['/home/ana/keys/k'],
      knownHostsFiles: ['/etc/aerie/kh'],
      jumps: [],
    });
    const plain = resolveEndpoint({ host: '198.51.100.7' }, ctx(null, { SSH_AUTH_SOCK: '/run/a' }));
    expect(plain).toMatchObject({ hostname: '198.51.100.7', port: 22, user: 'ana', agent: '/run/a' });
    expect(plain.identityFiles).toEqual([
      '/home/ana/.ssh/id_ed25519',
      '/home/ana/.ssh/id_ecdsa',
      '/home/ana/.ssh/id_rsa',
    ]);
  });

  it('chains jump hosts given inline, and refuses ProxyCommand', () => {
    const e = resolveEndpoint({ host: '10.1.1.40', 'proxy-jump': 'ops@gw1:2200,bastion' }, ctx(CONFIG));
    expect(e.jumps.map((j) => `${j.user}@${j.hostname}:${j.port}`)).toEqual([
      'ops@gw1:2200',
      'jump@bastion.example.org:22',
    ]);
    expect(() => resolveEndpoint({ host: 'hidden' }, ctx(CONFIG))).toThrow(SshConfigProblem);
    expect(resolveEndpoint({ host: 'hidden', 'proxy-jump': 'bastion' }, ctx(CONFIG)).hostKeyName).toBe('hidden-key');
  });

  it('parses jump specs with users, ports and IPv6 addresses', () => {
    expect(parseJumpSpec('a@b:2')).toEqual({ user: 'a', host: 'b', port: 2 });
    expect(parseJumpSpec('ssh://[2001:db8::1]:2022')).toEqual({ user: undefined, host: '2001:db8::1', port: 2022 });
    expect(parseJumpSpec('2001:db8::1')).toEqual({ user: undefined, host: '2001:db8::1', port: undefined });
    expect(() => parseJumpSpec('a@b:99999')).toThrow(/bad port/);
  });

  it('inlines Include files so aliases kept in config.d resolve', async () => {
    const files: Record<string, string> = { '/home/ana/.ssh/config.d/*': 'Host inc\n  HostName 203.0.113.5\n' };
    const text = await inlineIncludes('Include config.d/*\nHost other\n  Port 1\n', '/home/ana', async (p) =>
      files[p] ? [files[p]!] : [],
    );
    expect(resolveEndpoint({ host: 'inc' }, ctx(text)).hostname).toBe('203.0.113.5');
  });
});

describe('ssh host entries in the config file', () => {
  const doc = (host: string) => `
hosts:
  gpu:
${host}
target: { model-path: /models/m, host: gpu }
stages:
  generate: { input: /data/in.jsonl }
  extract: { dump-dir: /dev/shm/hs }
  train: { driver: specforge-v0.2, draft-model-config: /models/draft.json }
`;

  it('parses an ssh host with strict host key checking by default', async () => {
    const { parseConfigText } = await import('../../src/config/load.js');
    const cfg = parseConfigText(
      doc(
        '    kind: ssh\n    ssh: { host: gpu-a }\n    exec-prefix: [pct, exec, "129", "--"]\n    workdir: /data/aerie',
      ),
      'x.yaml',
      {},
    );
    expect(cfg.hosts.gpu).toEqual({
      kind: 'ssh',
      ssh: { host: 'gpu-a', 'strict-host-key-checking': 'yes' },
      'exec-prefix': ['pct', 'exec', '129', '--'],
      'http-address': '127.0.0.1',
      workdir: '/data/aerie',
    });
  });

  it('refuses a relative work dir, an exec prefix written as one string, and unknown ssh keys', async () => {
    const { parseConfigText, ConfigError } = await import('../../src/config/load.js');
    let err: unknown;
    try {
      parseConfigText(
        doc(
          '    kind: ssh\n    ssh: { host: gpu-a, strict-host-key-checking: "no", passphrase: x }\n    exec-prefix: ["pct exec 129 --"]\n    workdir: ~/aerie',
        ),
        'x.yaml',
        {},
      );
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const text = (err as Error).message;
    expect(text).toMatch(/hosts\.gpu\.workdir: must be an absolute path on the host/);
    expect(text).toMatch(/exec-prefix.*give each its own element, e\.g\. \["pct", "exec", "129", "--"\]/);
    expect(text).toMatch(/hosts\.gpu\.ssh\.strict-host-key-checking/);
    expect(text).toMatch(/hosts\.gpu\.ssh\.passphrase: unknown key/);
  });
});
