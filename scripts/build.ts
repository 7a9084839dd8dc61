/**
 * Compiles src/ to dist/ and prebuilds the workflow bundle, so `aerie` and its worker run as
 * plain JavaScript: no tsx loader thread and no webpack in the worker process (together about
 * 130 MB of its resident memory; see README "The generate stage at 100k samples").
 *
 *   npx tsx scripts/build.ts [--force]
 *
 * dist/ is written under a temporary name and renamed into place, with the stamp of the
 * sources it came from; bin/aerie.mjs uses it only while that stamp matches the sources, and
 * runs from source through tsx otherwise, so an edited checkout never runs stale code.
 */
import { spawnSync } from 'node:child_process';
import { rm, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { STAMP_FILE, builtStamp, sourceStamp } from '../bin/build-stamp.mjs';

const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

async function build(): Promise<void> {
  const stamp = sourceStamp(root);
  if (!process.argv.includes('--force') && builtStamp(root) === stamp) {
    process.stdout.write('build: dist/ is current\n');
    return;
  }
  const started = Date.now();
  const tmp = join(root, `dist.tmp-${process.pid}`);
  await rm(tmp, { recursive: true, force: true });
  try {
    const tsc = spawnSync(
      process.execPath,
      [
        join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
        '-p',
        join(root, 'tsconfig.build.json'),
        '--outDir',
        tmp,
      ],
      {
        stdio: 'inherit',
      },
    );
    if (tsc.status !== 0) throw new Error(`tsc -p tsconfig.build.json failed (exit ${tsc.status ?? tsc.signal})`);
    const { code } = await bundleWorkflowCode({
      workflowsPath: join(root, 'src', 'workflows', 'index.ts'),
      logger: {
        log() {},
        trace() {},
        debug() {},
        info() {},
        warn: (m: string) => process.stderr.write(`${m}\n`),
        error: (m: string) => process.stderr.write(`${m}\n`),
      },
    });
    await writeFile(join(tmp, 'workflow-bundle.js'), code);
    // The stamp goes last: a dist/ without it is never used.
    await writeFile(join(tmp, STAMP_FILE), `${stamp}\n`);
    await rm(join(root, 'dist'), { recursive: true, force: true });
    await rename(tmp, join(root, 'dist'));
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
  process.stdout.write(
    `build: compiled src/ and the workflow bundle into dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
}

build().catch((err: unknown) => {
  process.stderr.write(`build: ${(err as Error).message}\n`);
  process.exit(1);
});
