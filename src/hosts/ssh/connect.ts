/**
 * One connection attempt to an SshEndpoint: jump hosts first (each through the previous
 * one), host keys checked against known_hosts at every hop, then ssh-agent and identity
 * files. Failures come back as typed errors whose messages name the host and fingerprint
 * and say what to do — never a key, a passphrase or an agent's contents.
 */
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import type { Duplex } from 'node:stream';
import type { AnyAuthMethod, AuthenticationType, Client, ConnectConfig } from 'ssh2';

// ssh2 (~14 MB resident) loads on the first SSH connection: a worker with only local hosts never pays for it.
let ssh2Lib: typeof import('ssh2') | undefined;
const ssh2 = (): typeof import('ssh2') => (ssh2Lib ??= createRequire(import.meta.url)('ssh2') as typeof import('ssh2'));
import {
  fingerprintSha256,
  judgeHostKey,
  keyTypeOf,
  knownHostName,
  knownHostsLine,
  parseKnownHosts,
  preferredHostKeyAlgorithms,
  type KnownHostEntry,
} from './known-hosts.js';
import type { SshEndpoint } from './options.js';

export type StrictHostKeyChecking = 'yes' | 'accept-new';

/** Retrying cannot help: the key, the trust decision or the credentials must change. */
export class SshTrustError extends Error {
  override readonly name = 'SshTrustError';
}
/** The host could not be reached or the handshake broke off; trying again later may work. */
export class SshConnectError extends Error {
  override readonly name = 'SshConnectError';
}

export const GLOBAL_KNOWN_HOSTS = '/etc/ssh/ssh_known_hosts';

export interface ConnectTuning {
  strict: StrictHostKeyChecking;
  keepaliveIntervalMs: number;
  keepaliveCountMax: number;
  readyTimeoutMs: number;
}

export interface VerifiedKey {
  host: string;
  keyType: string;
  fingerprint: string;
  /** true when this connection recorded the key (accept-new). */
  added: boolean;
}

export interface Connected {
  client: Client;
  /** Jump host clients, first hop first; they live as long as client. */
  jumps: Client[];
  keys: VerifiedKey[];
}

async function readKnownHosts(files: readonly string[]): Promise<KnownHostEntry[]> {
  const all: KnownHostEntry[] = [];
  for (const file of [...files, GLOBAL_KNOWN_HOSTS]) {
    try {
      all.push(...parseKnownHosts(await readFile(file, 'utf8'), file));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return all;
}

/** Private keys that exist and can be used without a passphrase; encrypted ones are named, not read out. */
async function usableKeys(files: readonly string[], notes: string[]): Promise<{ path: string; key: Buffer }[]> {
  const keys: { path: string; key: Buffer }[] = [];
  for (const path of files) {
    let data: Buffer;
    try {
      data = await readFile(path);
    } catch {
      continue;
    }
    const parsed = ssh2().utils.parseKey(data);
    if (parsed instanceof Error) {
      notes.push(
        /passphrase/i.test(parsed.message)
          ? `${path} is passphrase-protected (add it to ssh-agent: ssh-add ${path})`
          : `${path} is not a usable private key`,
      );
      continue;
    }
    keys.push({ path, key: data });
  }
  return keys;
}

function authHandlerFor(e: SshEndpoint, keys: { path: string; key: Buffer }[], tried: string[]) {
  const queue: AnyAuthMethod[] = [];
  if (e.agent && !e.identitiesOnly) queue.push({ type: 'agent', username: e.user, agent: e.agent });
  for (const k of keys) queue.push({ type: 'publickey', username: e.user, key: k.key });
  const labels = [...(e.agent && !e.identitiesOnly ? ['ssh-agent'] : []), ...keys.map((k) => k.path)];
  let i = 0;
  return (
    _left: AuthenticationType[] | null,
    _partial: boolean | null,
    next: (m: AnyAuthMethod | false) => void,
  ): void => {
    if (i >= queue.length) return next(false);
    tried.push(labels[i]!);
    next(queue[i++]!);
  };
}

function trustFix(e: SshEndpoint, name: string): string {
  const port = e.port === 22 ? '' : `-p ${e.port} `;
  return `check the fingerprint with the host's administrator, then add the key (ssh-keyscan ${port}${e.hostname} >> ${e.knownHostsFiles[0]}), or set ssh.strict-host-key-checking: accept-new to trust ${name} on first use`;
}

/** One hop: TCP (or a stream through the previous hop), host key check, authentication. */
async function connectHop(
  e: SshEndpoint,
  sock: Duplex | undefined,
  tuning: ConnectTuning,
  hostLabel: string,
): Promise<{ client: Client; key: VerifiedKey }> {
  const name = knownHostName(e.hostKeyName, e.port);
  const entries = await readKnownHosts(e.knownHostsFiles);
  const notes: string[] = [];
  const keys = await usableKeys(e.identityFiles, notes);
  const tried: string[] = [];
  let refusal: Error | null = null;
  let verified: VerifiedKey | null = null;

  const hostVerifier = (blob: Buffer, done: (ok: boolean) => void): void => {
    const keyType = keyTypeOf(blob);
    const fingerprint = fingerprintSha256(blob);
    const verdict = judgeHostKey(entries, name, blob);
    const what = `${hostLabel}: the ${keyType} host key of ${name} (${fingerprint})`;
    if (verdict.kind === 'known') {
      verified = { host: name, keyType, fingerprint, added: false };
      return done(true);
    }
    if (verdict.kind === 'revoked') {
      refusal = new SshTrustError(`${what} is marked @revoked in ${verdict.file}:${verdict.line}; refusing to connect`);
      return done(false);
    }
    if (verdict.kind === 'changed') {
      refusal = new SshTrustError(
        `${what} does not match the key recorded in ${verdict.file}:${verdict.line} — the host key CHANGED. ` +
          `This can be a reinstalled host or someone intercepting the connection; refusing to connect. ` +
          `If the change is expected, remove the old key (ssh-keygen -R '${name}' -f ${verdict.file}) and add the new one after checking its fingerprint`,
      );
      return done(false);
    }
    if (tuning.strict !== 'accept-new') {
      refusal = new SshTrustError(
        `${what} is not in known_hosts (${e.knownHostsFiles.join(', ')}) and strict host key checking is on; ${trustFix(e, name)}`,
      );
      return done(false);
    }
    const file = e.knownHostsFiles[0]!;
    mkdir(dirname(file), { recursive: true, mode: 0o700 })
      .then(() => appendFile(file, `${knownHostsLine(name, blob)}\n`, { mode: 0o600 }))
      .then(
        () => {
          verified = { host: name, keyType, fingerprint, added: true };
          done(true);
        },
        (err: Error) => {
          refusal = new SshTrustError(`${what} is new and could not be recorded in ${file}: ${err.message}`);
          done(false);
        },
      );
  };

  const client = new (ssh2().Client)();
  const config: ConnectConfig = {
    host: e.hostname,
    port: e.port,
    username: e.user,
    sock: sock as ConnectConfig['sock'],
    hostVerifier: hostVerifier as ConnectConfig['hostVerifier'],
    authHandler: authHandlerFor(e, keys, tried) as unknown as ConnectConfig['authHandler'],
    algorithms: { serverHostKey: preferredHostKeyAlgorithms(entries, name) as never },
    keepaliveInterval: tuning.keepaliveIntervalMs,
    keepaliveCountMax: tuning.keepaliveCountMax,
    readyTimeout: tuning.readyTimeoutMs,
  };
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error & { level?: string; code?: string }) => {
      client.removeListener('ready', onReady);
      client.end();
      if (refusal) return reject(refusal);
      if (err.level === 'client-authentication') {
        const triedText = tried.length ? tried.join(', ') : 'nothing (no agent, no key file found)';
        return reject(
          new SshTrustError(
            `${hostLabel}: ${e.user}@${name} refused every key aerie offered (tried: ${triedText})` +
              `${notes.length ? `; ${notes.join('; ')}` : ''}. Fix: set ssh.identity-file or IdentityFile in the ssh config, or load the key into ssh-agent`,
          ),
        );
      }
      reject(
        new SshConnectError(
          `${hostLabel}: cannot connect to ${e.user}@${e.hostname}:${e.port}: ${err.message}${err.code ? ` (${err.code})` : ''}`,
        ),
      );
    };
    const onReady = () => {
      client.removeListener('error', onError);
      resolve();
    };
    client.once('ready', onReady);
    client.once('error', onError);
    client.connect(config);
  });
  return { client, key: verified! };
}

function forwardThrough(jump: Client, host: string, port: number, hostLabel: string): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    jump.forwardOut('127.0.0.1', 0, host, port, (err, stream) => {
      if (err) reject(new SshConnectError(`${hostLabel}: the jump host cannot reach ${host}:${port}: ${err.message}`));
      else resolve(stream as unknown as Duplex);
    });
  });
}

/** The whole chain; on any failure every hop opened so far is closed. */
export async function connectEndpoint(e: SshEndpoint, tuning: ConnectTuning, hostLabel: string): Promise<Connected> {
  const jumps: Client[] = [];
  const keys: VerifiedKey[] = [];
  try {
    let sock: Duplex | undefined;
    for (const hop of e.jumps) {
      const { client, key } = await connectHop(hop, sock, tuning, `${hostLabel} (jump host ${hop.alias})`);
      jumps.push(client);
      keys.push(key);
      sock = undefined;
      const next = e.jumps[jumps.length] ?? e;
      sock = await forwardThrough(client, next.hostname, next.port, hostLabel);
    }
    const { client, key } = await connectHop(e, sock, tuning, hostLabel);
    keys.push(key);
    return { client, jumps, keys };
  } catch (err) {
    for (const j of jumps.reverse()) j.end();
    throw err;
  }
}
