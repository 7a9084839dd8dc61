/**
 * A test file's own temp folder: made in beforeAll (or beforeEach), and in afterAll (afterEach)
 * every process aerie recorded under it is stopped by its launch record before the folder is removed.
 */
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { stopRecordedLaunches } from './cleanup.js';

export interface Workdir {
  /** The folder; reading it before beforeAll has run is a mistake in the test, and throws. */
  readonly path: string;
}

export interface WorkdirOptions {
  /** A fresh folder for every test (beforeEach/afterEach) instead of one for the file. */
  each?: boolean;
  /** The folder's real path (tmpdir may sit behind a symlink), for tests comparing paths a process reports. */
  realpath?: boolean;
}

export async function makeWorkdir(prefix: string, opts: Pick<WorkdirOptions, 'realpath'> = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return opts.realpath ? realpath(dir) : dir;
}

/** Whatever a test left running when it ended early is stopped by its launch record; then the folder goes. */
export async function removeWorkdir(dir: string): Promise<void> {
  await stopRecordedLaunches(dir);
  await rm(dir, { recursive: true, force: true });
}

/** Registers the file's beforeAll/afterAll (beforeEach/afterEach with `each`) for a temp folder named `<prefix>XXXXXX`. */
export function useWorkdir(prefix: string, opts: WorkdirOptions = {}): Workdir {
  let dir: string | undefined;
  const [before, after] = opts.each ? [beforeEach, afterEach] : [beforeAll, afterAll];
  before(async () => {
    dir = await makeWorkdir(prefix, opts);
  });
  after(async () => {
    if (dir) await removeWorkdir(dir);
    dir = undefined;
  });
  const hook = opts.each ? 'beforeEach' : 'beforeAll';
  return {
    get path() {
      if (!dir)
        throw new Error(`useWorkdir('${prefix}'): the folder is made in ${hook}; read it inside a hook or test`);
      return dir;
    },
  };
}

export interface TempDirs {
  /** A fresh folder `<prefix>XXXXXX`, removed with the others. */
  make(prefix: string): Promise<string>;
  /** Takes a folder a helper made (a target, a staged plugin) into the set; returns it. */
  track(dir: string): string;
}

/**
 * Folders a test file makes as it goes (a helper's target, a case's dump folder): each is removed
 * in afterAll (afterEach with `each`), whatever aerie recorded under it stopped by its launch record first.
 */
export function useTempDirs(opts: { each?: boolean } = {}): TempDirs {
  const dirs: string[] = [];
  (opts.each ? afterEach : afterAll)(async () => {
    for (const d of dirs.splice(0)) await removeWorkdir(d);
  });
  return {
    async make(prefix) {
      const d = await makeWorkdir(prefix);
      dirs.push(d);
      return d;
    },
    track(dir) {
      dirs.push(dir);
      return dir;
    },
  };
}
