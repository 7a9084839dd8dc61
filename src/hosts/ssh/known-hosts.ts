/**
 * known_hosts, as OpenSSH reads it: plain and hashed (|1|salt|hmac) host names, [host]:port
 * for other ports, wildcard and negated patterns, @revoked lines. Pure decisions: which key
 * types to ask the server for, and whether the key it showed is known, new, changed or revoked.
 */
import { createHash, createHmac } from 'node:crypto';

export interface KnownHostEntry {
  marker: '' | '@revoked' | '@cert-authority';
  hosts: string;
  keyType: string;
  key: Buffer;
  file: string;
  line: number;
}

export type HostKeyVerdict =
  | { kind: 'known' }
  | { kind: 'unknown' }
  | { kind: 'changed'; file: string; line: number }
  | { kind: 'revoked'; file: string; line: number };

/** The name a host has in known_hosts: `host` on port 22, `[host]:port` otherwise. */
export function knownHostName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

export function parseKnownHosts(text: string, file: string): KnownHostEntry[] {
  const out: KnownHostEntry[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const f = line.split(/\s+/);
    let marker: KnownHostEntry['marker'] = '';
    if (f[0] === '@revoked' || f[0] === '@cert-authority') marker = f.shift() as KnownHostEntry['marker'];
    if (f.length < 3) return;
    const key = Buffer.from(f[2]!, 'base64');
    if (key.length === 0) return;
    out.push({ marker, hosts: f[0]!, keyType: f[1]!, key, file, line: i + 1 });
  });
  return out;
}

function globMatch(pattern: string, name: string): boolean {
  const re = new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
    'i',
  );
  return re.test(name);
}

/** Does a known_hosts host field (comma list, patterns, or one hashed name) name `name`? */
export function hostFieldMatches(field: string, name: string): boolean {
  if (field.startsWith('|1|')) {
    const [, , salt, hash] = field.split('|');
    if (!salt || !hash) return false;
    const mac = createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64');
    return mac === hash;
  }
  let matched = false;
  for (const pattern of field.split(',')) {
    if (pattern.startsWith('!')) {
      if (globMatch(pattern.slice(1), name)) return false;
    } else if (globMatch(pattern, name)) matched = true;
  }
  return matched;
}

/** The key type named inside an SSH public key blob (its first string). */
export function keyTypeOf(blob: Buffer): string {
  if (blob.length < 4) return 'unknown';
  const len = blob.readUInt32BE(0);
  if (len <= 0 || len > 64 || blob.length < 4 + len) return 'unknown';
  return blob.subarray(4, 4 + len).toString('latin1');
}

/** `SHA256:<base64, no padding>`, as `ssh-keygen -l` and OpenSSH's warnings print it. */
export function fingerprintSha256(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

export function judgeHostKey(entries: readonly KnownHostEntry[], name: string, blob: Buffer): HostKeyVerdict {
  const type = keyTypeOf(blob);
  const forHost = entries.filter((e) => e.marker !== '@cert-authority' && hostFieldMatches(e.hosts, name));
  const revoked = entries.find((e) => e.marker === '@revoked' && e.key.equals(blob));
  if (revoked) return { kind: 'revoked', file: revoked.file, line: revoked.line };
  const plain = forHost.filter((e) => e.marker === '');
  if (plain.some((e) => e.keyType === type && e.key.equals(blob))) return { kind: 'known' };
  const other = plain.find((e) => e.keyType === type);
  if (other) return { kind: 'changed', file: other.file, line: other.line };
  return { kind: 'unknown' };
}

/** Host key algorithms for a key type as it appears in known_hosts. */
function algorithmsFor(keyType: string): string[] {
  return keyType === 'ssh-rsa' ? ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'] : [keyType];
}

/** ssh2's default order. */
export const DEFAULT_HOST_KEY_ALGORITHMS = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'rsa-sha2-512',
  'rsa-sha2-256',
  'ssh-rsa',
];

/**
 * Algorithms for which a key is already known come first (as OpenSSH orders them), so a
 * server with several host keys shows the one we can check rather than one we never saw.
 */
export function preferredHostKeyAlgorithms(entries: readonly KnownHostEntry[], name: string): string[] {
  const known = entries
    .filter((e) => e.marker === '' && hostFieldMatches(e.hosts, name))
    .flatMap((e) => algorithmsFor(e.keyType));
  const first = DEFAULT_HOST_KEY_ALGORITHMS.filter((a) => known.includes(a));
  return [...first, ...DEFAULT_HOST_KEY_ALGORITHMS.filter((a) => !first.includes(a))];
}

export function knownHostsLine(name: string, blob: Buffer): string {
  return `${name} ${keyTypeOf(blob)} ${blob.toString('base64')}`;
}
