/**
 * A LocalHost on a test's own temp folder: made in beforeAll (beforeEach with `each`); after,
 * the host is closed, whatever aerie launched under the folder is stopped by its launch record,
 * and the folder goes.
 */
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { LocalHost } from '../../src/hosts/local/local-host.js';
import { makeWorkdir, removeWorkdir, type WorkdirOptions } from './workdir.js';

export interface LocalHostOptions extends WorkdirOptions {
  /** The host's workdir inside the folder (e.g. 'host'), leaving the rest for the test's inputs; default the folder. */
  sub?: string;
  /** The host's name; default 'local'. */
  name?: string;
  nvidiaSmi?: string[];
  /** Runs once the folder exists, before the host is made (e.g. a fake nvidia-smi it is given). */
  setup?: (dir: string) => void | Promise<void>;
}

export interface LocalHostFixture {
  /** The temp folder (`<prefix>XXXXXX`). */
  readonly dir: string;
  /** A LocalHost whose workdir is the folder, or `<folder>/<sub>`. */
  readonly host: LocalHost;
  /** A further, fresh LocalHost on `<folder>/<sub>` ('' for the folder itself: a second worker's view), closed with the rest. */
  hostAt(sub: string, opts?: { name?: string; nvidiaSmi?: string[] }): LocalHost;
}

export function useLocalHost(prefix: string, opts: LocalHostOptions = {}): LocalHostFixture {
  let made: { dir: string; host: LocalHost } | undefined;
  const more: LocalHost[] = [];
  const [before, after] = opts.each ? [beforeEach, afterEach] : [beforeAll, afterAll];
  before(async () => {
    const dir = await makeWorkdir(prefix, opts);
    await opts.setup?.(dir);
    const workdir = opts.sub ? join(dir, opts.sub) : dir;
    made = { dir, host: new LocalHost({ name: opts.name ?? 'local', workdir, nvidiaSmi: opts.nvidiaSmi }) };
  });
  after(async () => {
    if (!made) return;
    for (const h of more.splice(0)) await h.close();
    await made.host.close();
    await removeWorkdir(made.dir);
    made = undefined;
  });
  const get = () => {
    if (!made)
      throw new Error(
        `useLocalHost('${prefix}'): made in ${opts.each ? 'beforeEach' : 'beforeAll'}; read it inside a hook or test`,
      );
    return made;
  };
  return {
    get dir() {
      return get().dir;
    },
    get host() {
      return get().host;
    },
    hostAt(sub, o = {}) {
      const h = new LocalHost({ name: o.name ?? 'local', workdir: join(get().dir, sub), nvidiaSmi: o.nvidiaSmi });
      more.push(h);
      return h;
    },
  };
}
