/**
 * Where an SshHost connects: its config entry resolved against the ssh config file (and the
 * files its Include lines name), read from the worker's disk when the host first connects.
 */
import { readdir, readFile } from 'node:fs/promises';
import { homedir, userInfo } from 'node:os';
import type { StrictHostKeyChecking } from './connect.js';
import { inlineIncludes, resolveEndpoint, type SshEndpoint, type SshTarget } from './options.js';

/** The `ssh` block of a host's config entry. */
export type SshHostTarget = SshTarget & { 'config-file'?: string; 'strict-host-key-checking'?: StrictHostKeyChecking };

/** Files matching an absolute path whose last component may hold * and ? (for Include). */
async function readMatching(pattern: string): Promise<string[]> {
  const slash = pattern.lastIndexOf('/');
  const dir = pattern.slice(0, slash) || '/';
  const base = pattern.slice(slash + 1);
  if (!/[*?]/.test(base))
    return readFile(pattern, 'utf8').then(
      (t) => [t],
      () => [],
    );
  const re = new RegExp(
    `^${base
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
  );
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => re.test(n)).sort();
  return (await Promise.all(names.map((n) => readFile(`${dir}/${n}`, 'utf8').catch(() => null)))).filter(
    (t): t is string => t !== null,
  );
}

/** The endpoint for a config entry, reading the ssh config file (and its Includes) now. */
export async function loadEndpoint(ssh: SshHostTarget): Promise<SshEndpoint> {
  const home = homedir();
  const configPath = ssh['config-file']?.replace(/^~(?=\/|$)/, home) ?? `${home}/.ssh/config`;
  let text: string | null = null;
  try {
    text = await inlineIncludes(await readFile(configPath, 'utf8'), home, readMatching);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || ssh['config-file'])
      throw new Error(`cannot read ssh config ${configPath}: ${(err as Error).message}`);
  }
  return resolveEndpoint(ssh, { sshConfigText: text, home, localUser: userInfo().username, env: process.env });
}
