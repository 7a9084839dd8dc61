/**
 * A tmpfs the test (or bench) mounts itself under its own temp dir, to put a dump dir on a
 * different filesystem from the output (as /dev/shm is on a GPU host) without touching the
 * machine's shared /dev/shm. Needs root (the test machines run as root).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Tmpfs {
  path: string;
  unmount(): Promise<void>;
}

export async function mountTmpfs(parent: string, sizeMiB: number): Promise<Tmpfs> {
  const path = join(parent, `tmpfs-${randomBytes(4).toString('hex')}`);
  await mkdir(path, { recursive: true });
  await run('mount', ['-t', 'tmpfs', '-o', `size=${sizeMiB}m,mode=0755`, 'aerie-test-tmpfs', path]);
  let mounted = true;
  return {
    path,
    async unmount() {
      if (!mounted) return;
      // A process that still has a file open there (an sshd session ending) makes umount
      // say busy for a moment: retry until a deadline instead of sleeping a fixed time.
      const deadline = Date.now() + 20_000;
      for (;;) {
        try {
          await run('umount', [path]);
          break;
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      mounted = false;
      await rmdir(path);
    },
  };
}
