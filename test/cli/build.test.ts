/**
 * The compiled build: `aerie` runs dist/ only while it was built from exactly the current
 * sources, and the TypeScript sources otherwise. Exercised on a copy of the project (sharing
 * node_modules), so the checkout's own dist/ is never touched.
 */
import { appendFile, cp, mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildIsCurrent, builtStamp, sourceStamp } from '../../bin/build-stamp.mjs';
import { AERIE_HOME } from '../../src/config/load.js';
import { useWorkdir } from '../support/workdir.js';
import { runOk } from '../support/processes.js';

const tmp = useWorkdir('aerie-build-');

describe('build stamp', () => {
  it('is current only for a dist/ stamped with the digest of the present sources and lockfile', async () => {
    const root = join(tmp.path, 'stamp');
    await mkdir(join(root, 'src', 'cli'), { recursive: true });
    await writeFile(join(root, 'src', 'cli', 'main.ts'), 'export const a = 1;\n');
    await writeFile(join(root, 'package-lock.json'), '{}\n');
    expect(builtStamp(root)).toBeNull();
    expect(buildIsCurrent(root)).toBe(false);

    await mkdir(join(root, 'dist'));
    await writeFile(join(root, 'dist', 'BUILD-STAMP'), `${sourceStamp(root)}\n`);
    expect(buildIsCurrent(root)).toBe(true);

    await appendFile(join(root, 'src', 'cli', 'main.ts'), '// edited\n');
    expect(buildIsCurrent(root)).toBe(false);
    await writeFile(join(root, 'dist', 'BUILD-STAMP'), `${sourceStamp(root)}\n`);
    expect(buildIsCurrent(root)).toBe(true);

    // A new file, or a changed lockfile (other dependencies), also makes the build stale.
    await writeFile(join(root, 'src', 'extra.ts'), 'export {};\n');
    expect(buildIsCurrent(root)).toBe(false);
    await writeFile(join(root, 'dist', 'BUILD-STAMP'), `${sourceStamp(root)}\n`);
    await writeFile(join(root, 'package-lock.json'), '{"lockfileVersion": 3}\n');
    expect(buildIsCurrent(root)).toBe(false);
  });
});

describe('aerie on a copy of the project', () => {
  it('runs compiled after the build, and from source as soon as a source file changes', async () => {
    const root = join(tmp.path, 'project');
    await mkdir(root);
    for (const p of [
      'bin',
      'src',
      'scripts',
      'examples',
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
    ]) {
      await cp(join(AERIE_HOME, p), join(root, p), { recursive: true });
    }
    await symlink(join(AERIE_HOME, 'node_modules'), join(root, 'node_modules'));
    const node = (args: string[]) =>
      runOk(process.execPath, args, { cwd: root, timeoutMs: 180_000, env: { AERIE_FROM_SOURCE: '' } });

    const built = await node(['--import', 'tsx', join(root, 'scripts', 'build.ts')]);
    expect(built.stdout).toMatch(/compiled src\/ and the workflow bundle into dist\//);
    expect((await node([join(root, 'bin', 'aerie.mjs'), 'version'])).stdout).toMatch(
      /— compiled \(dist\/, prebuilt workflow bundle\)/,
    );
    // A second build of the same sources does nothing.
    expect((await node(['--import', 'tsx', join(root, 'scripts', 'build.ts')])).stdout).toMatch(/dist\/ is current/);

    await appendFile(join(root, 'src', 'shared.ts'), '\n// an edit after the build\n');
    expect((await node([join(root, 'bin', 'aerie.mjs'), 'version'])).stdout).toMatch(/— from source through tsx/);
  }, 240_000);
});
