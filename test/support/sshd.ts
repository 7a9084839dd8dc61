/**
 * A real OpenSSH server (Debian's /usr/sbin/sshd) owned by one test file: its own temp
 * dir, host key, authorized key, sshd_config and pid file, listening on a free loopback
 * port. It is stopped by its recorded pid; the per-connection sshd processes it forked are
 * found by their parent pid (never by name) and stopped the same way.
 */
import { spawn, execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { scanProcStats } from '../../src/hosts/local/proc.js';
import { isDead } from '../../src/hosts/protocol/proc-stat.js';
import { freePort } from '../../src/temporal/dev-server.js';

const run = promisify(execFile);
export const SSHD = '/usr/sbin/sshd';

export interface KeyPair {
  /** Private key file (no passphrase). */
  path: string;
  /** "ssh-ed25519 AAAA... comment" */
  publicLine: string;
  /** "SHA256:..." as ssh-keygen -l prints it. */
  fingerprint: string;
}

/** A fresh ed25519 key pair in dir. */
export async function makeKey(dir: string, name: string): Promise<KeyPair> {
  const path = join(dir, name);
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', `aerie-test-${name}`, '-f', path]);
  const publicLine = (await readFile(`${path}.pub`, 'utf8')).trim();
  const blob = Buffer.from(publicLine.split(/\s+/)[1]!, 'base64');
  const fingerprint = `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
  return { path, publicLine, fingerprint };
}

export interface TestSshd {
  dir: string;
  port: number;
  /** The listener's pid (recorded when it was spawned). */
  pid: number;
  hostKey: KeyPair;
  /** `[127.0.0.1]:port keytype key` — the line a known_hosts file needs to trust this server. */
  knownHostsLine: string;
  /** Per-connection sshd processes: children of the listener. */
  sessionPids(): Promise<number[]>;
  /** SIGKILL every per-connection sshd process (drops every client connection); returns their pids. */
  dropConnections(): Promise<number[]>;
  stop(): Promise<void>;
}

export interface SshdOptions {
  /** Public key lines allowed to log in. */
  authorizedKeys: string[];
  /** Extra sshd_config lines. */
  extraConfig?: string[];
  /**
   * A path that this sshd's sessions see as an empty tmpfs of their own: the sshd runs in a
   * mount namespace of its own (unshare -m, private propagation) with a tmpfs mounted there, so
   * a host reached through it is a machine that does not share that folder. Needs root.
   */
  privateTmpfsAt?: string;
}

async function childrenOf(pid: number): Promise<number[]> {
  return (await scanProcStats()).filter((s) => s.ppid === pid && !isDead(s)).map((s) => s.pid);
}

function killPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** Resolves once something on port speaks SSH (the banner arrives), or rejects at the deadline. */
async function waitForBanner(port: number, exited: () => string | null, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect({ host: '127.0.0.1', port });
      const done = (v: boolean) => {
        s.destroy();
        resolve(v);
      };
      s.setTimeout(2000, () => done(false));
      s.once('data', (d) => done(d.toString('latin1').startsWith('SSH-')));
      s.once('error', () => done(false));
    });
    if (ok) return;
    const why = exited();
    if (why !== null) throw new Error(`sshd exited before listening: ${why}`);
    if (Date.now() > deadline) throw new Error(`sshd did not answer on 127.0.0.1:${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startSshd(opts: SshdOptions): Promise<TestSshd> {
  // sshd refuses to start without its privilege-separation directory (normally made by systemd).
  await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
  const dir = await mkdtemp(join(tmpdir(), 'aerie-sshd-'));
  const hostKey = await makeKey(dir, 'host_ed25519');
  await writeFile(join(dir, 'authorized_keys'), opts.authorizedKeys.join('\n') + '\n', { mode: 0o600 });

  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const config = [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey.path}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'UsePAM no',
      'StrictModes no',
      'PermitRootLogin prohibit-password',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'AllowTcpForwarding yes',
      'PermitTunnel no',
      'X11Forwarding no',
      'PrintMotd no',
      'Subsystem sftp internal-sftp',
      'LogLevel ERROR',
      ...(opts.extraConfig ?? []),
      '',
    ].join('\n');
    const configPath = join(dir, 'sshd_config');
    await writeFile(configPath, config);
    // -D: stay in the foreground, so the pid we spawn is the listener; -e: log to stderr.
    const argv = [SSHD, '-D', '-e', '-f', configPath];
    // unshare and sh exec into sshd: the pid spawned stays the listener's. The namespace (and
    // its tmpfs) goes with the last process in it.
    const cmd = opts.privateTmpfsAt
      ? [
          'unshare',
          '-m',
          '--propagation',
          'private',
          'sh',
          '-c',
          'mount -t tmpfs -o size=16m aerie-test-private "$0" && exec "$@"',
          opts.privateTmpfsAt,
          ...argv,
        ]
      : argv;
    const child = spawn(cmd[0]!, cmd.slice(1), { detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    let exit: string | null = null;
    child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    child.once('exit', (code, signal) => (exit = `${signal ?? code}: ${stderr.trim()}`));
    child.unref();
    (child.stderr as unknown as { unref?: () => void }).unref?.();
    const pid = child.pid!;
    try {
      await waitForBanner(port, () => exit);
    } catch (err) {
      lastError = err;
      killPid(pid, 'SIGKILL');
      continue;
    }
    const sshd: TestSshd = {
      dir,
      port,
      pid,
      hostKey,
      knownHostsLine: `[127.0.0.1]:${port} ${hostKey.publicLine.split(/\s+/).slice(0, 2).join(' ')}`,
      sessionPids: () => childrenOf(pid),
      async dropConnections() {
        const pids = await childrenOf(pid);
        for (const p of pids) killPid(p, 'SIGKILL');
        return pids;
      },
      async stop() {
        const sessions = await childrenOf(pid);
        killPid(pid, 'SIGTERM');
        for (const p of sessions) killPid(p, 'SIGTERM');
        const deadline = Date.now() + 5000;
        while (Date.now() < deadline && exit === null) await new Promise((r) => setTimeout(r, 20));
        if (exit === null) killPid(pid, 'SIGKILL');
        await rm(dir, { recursive: true, force: true });
      },
    };
    return sshd;
  }
  await rm(dir, { recursive: true, force: true });
  throw lastError;
}

/** An ssh_config(5) file with one Host block per alias. */
export function sshConfigText(blocks: Record<string, Record<string, string | number>>): string {
  return (
    Object.entries(blocks)
      .map(([alias, opts]) => [`Host ${alias}`, ...Object.entries(opts).map(([k, v]) => `  ${k} ${v}`)].join('\n'))
      .join('\n\n') + '\n'
  );
}
