/** known_hosts decisions: known, unknown, changed, revoked; hashed names; algorithm order. */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  fingerprintSha256,
  hostFieldMatches,
  judgeHostKey,
  keyTypeOf,
  knownHostName,
  knownHostsLine,
  parseKnownHosts,
  preferredHostKeyAlgorithms,
} from '../../src/hosts/ssh/known-hosts.js';

/** A wire-format public key blob: string type, then some bytes. */
function blob(type: string, body: string): Buffer {
  const t = Buffer.from(type);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(t.length);
  return Buffer.concat([len, t, Buffer.from(body)]);
}

const A = blob('ssh-ed25519', 'key-a');
const B = blob('ssh-ed25519', 'key-b');
const R = blob('ssh-rsa', 'key-r');

describe('known_hosts', () => {
  it('names hosts as OpenSSH does and reads the key type from the blob', () => {
    expect(knownHostName('gpu', 22)).toBe('gpu');
    expect(knownHostName('127.0.0.1', 2222)).toBe('[127.0.0.1]:2222');
    expect(keyTypeOf(A)).toBe('ssh-ed25519');
    expect(fingerprintSha256(A)).toMatch(/^SHA256:[A-Za-z0-9+/]+$/);
    expect(knownHostsLine('[h]:2', A)).toBe(`[h]:2 ssh-ed25519 ${A.toString('base64')}`);
  });

  it('matches plain, wildcard, negated and hashed host fields', () => {
    expect(hostFieldMatches('gpu,gpu.lab', 'gpu.lab')).toBe(true);
    expect(hostFieldMatches('*.lab,!bad.lab', 'gpu.lab')).toBe(true);
    expect(hostFieldMatches('*.lab,!bad.lab', 'bad.lab')).toBe(false);
    const salt = Buffer.from('0123456789abcdef0123');
    const hashed = `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update('[10.0.0.5]:2222').digest('base64')}`;
    expect(hostFieldMatches(hashed, '[10.0.0.5]:2222')).toBe(true);
    expect(hostFieldMatches(hashed, '10.0.0.5')).toBe(false);
  });

  it('judges a key known, unknown, changed or revoked', () => {
    const text = [
      `gpu ssh-ed25519 ${A.toString('base64')}`,
      '# comment',
      `@revoked * ssh-ed25519 ${blob('ssh-ed25519', 'stolen').toString('base64')}`,
    ].join('\n');
    const entries = parseKnownHosts(text, '/kh');
    expect(judgeHostKey(entries, 'gpu', A)).toEqual({ kind: 'known' });
    expect(judgeHostKey(entries, 'gpu', B)).toEqual({ kind: 'changed', file: '/kh', line: 1 });
    expect(judgeHostKey(entries, 'other', B)).toEqual({ kind: 'unknown' });
    // A key of a type not recorded for the host is new, not changed (as in OpenSSH).
    expect(judgeHostKey(entries, 'gpu', R)).toEqual({ kind: 'unknown' });
    expect(judgeHostKey(entries, 'anything', blob('ssh-ed25519', 'stolen'))).toEqual({
      kind: 'revoked',
      file: '/kh',
      line: 3,
    });
  });

  it('asks first for the key types already known for the host', () => {
    const entries = parseKnownHosts(`gpu ssh-rsa ${R.toString('base64')}`, '/kh');
    expect(preferredHostKeyAlgorithms(entries, 'gpu').slice(0, 3)).toEqual(['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa']);
    expect(preferredHostKeyAlgorithms(entries, 'other')[0]).toBe('ssh-ed25519');
  });
});
