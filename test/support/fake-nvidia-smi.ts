/**
 * An `nvidia-smi` for hosts without GPUs: a shell script answering exactly the two queries
 * aerie sends (so a changed query fails the test) with the CSV lines given.
 */
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Writes <binDir>/nvidia-smi; gpus are `index, uuid, name, used, total` lines, apps `pid, gpu_uuid, used` lines. */
export async function writeFakeNvidiaSmi(binDir: string, gpus: string[], apps: string[]): Promise<string> {
  await mkdir(binDir, { recursive: true });
  const path = join(binDir, 'nvidia-smi');
  const lines = (rows: string[]) => rows.map((r) => `${r}\\n`).join('');
  await writeFile(
    path,
    [
      '#!/bin/sh',
      'case "$1" in',
      `  --query-gpu=index,uuid,name,memory.used,memory.total) printf '${lines(gpus)}' ;;`,
      `  --query-compute-apps=pid,gpu_uuid,used_memory) printf '${lines(apps)}' ;;`,
      '  *) exit 2 ;;',
      'esac',
      '',
    ].join('\n'),
  );
  await chmod(path, 0o755);
  return path;
}
