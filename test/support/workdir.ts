/**
 * A test file's own temp folder: made in beforeAll, and in afterAll every process aerie
 * recorded under it is stopped by its launch record before the folder is removed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { stopRecordedLaunches } from './cleanup.js';

export interface Workdir {
  /** The folder; reading it before beforeAll has run is a mistake in the test, and throws. */
  readonly path: string;
}

export async function makeWorkdir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

/** Whatever a test left running when it ended early is stopped by its launch record; then the folder goes. */
export async function removeWorkdir(dir: string): Promise<void> {
  await stopRecordedLaunches(dir);
  await rm(dir, { recursive: true, force: true });
}

/** Registers the file's beforeAll/afterAll for a temp folder named `<prefix>XXXXXX`. */
export function useWorkdir(prefix: string): Workdir {
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await makeWorkdir(prefix);
  });
  afterAll(async () => {
    if (dir) await removeWorkdir(dir);
  });
  return {
    get path() {
      if (!dir)
        throw new Error(`useWorkdir('${prefix}'): the folder is made in beforeAll; read it inside a hook or test`);
      return dir;
    },
  };
}
