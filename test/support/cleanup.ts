/**
 * Stops every process group aerie recorded under a test's directory tree (servers, trainers
 * a test left running when it ended early), by its launch record — never by name.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LocalHost } from '../../src/hosts/local/local-host.js';
import type { ProcRecord } from '../../src/hosts/host.js';

async function procDirs(root: string, depth = 5): Promise<string[]> {
  if (depth < 0) return [];
  const out: string[] = [];
  for (const e of await readdir(root, { withFileTypes: true }).catch(() => [])) {
    if (!e.isDirectory()) continue;
    const p = join(root, e.name);
    if (e.name === '.aerie') out.push(join(p, 'procs'));
    else if (e.name !== 'node_modules') out.push(...(await procDirs(p, depth - 1)));
  }
  return out;
}

export async function stopRecordedLaunches(root: string): Promise<number> {
  let stopped = 0;
  for (const dir of await procDirs(root)) {
    const host = new LocalHost({ name: 'cleanup', workdir: join(dir, '..', '..') });
    for (const f of await readdir(dir).catch(() => [] as string[])) {
      if (!f.endsWith('.json')) continue;
      const record = JSON.parse(await readFile(join(dir, f), 'utf8')) as ProcRecord;
      if ((await host.procStatus(record)).state !== 'alive') continue;
      await host.killGroup(record, { graceMs: 5000 });
      stopped++;
    }
  }
  return stopped;
}
