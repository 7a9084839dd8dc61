/**
 * Preflight refuses a patched-server extraction whose SGLang never reads the dump variable
 * (conformance.md S1: no release does), probing the server launcher's own interpreter; a
 * patched install passes. The SGLang packages here are stand-ins on PYTHONPATH with and
 * without the variable in their source, behind a `python` wrapper like a venv's.
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPreflight } from '../../src/activities/preflight.js';
import { LocalHost } from '../../src/hosts/local.js';
import { judgeDumpEnv, probeDumpEnv } from '../../src/stages/dump-env-probe.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { legacyDemoConfig } from '../support/demo-config.js';

let dir: string;
let host: LocalHost;

/** An interpreter whose `sglang` is a stand-in package, patched (reads the variable) or stock. */
async function fakeSglang(name: string, patched: boolean): Promise<string> {
  const site = join(dir, name, 'site');
  await mkdir(join(site, 'sglang', 'srt'), { recursive: true });
  await writeFile(join(site, 'sglang', '__init__.py'), '');
  await writeFile(join(site, 'sglang', 'launch_server.py'), '');
  await writeFile(join(site, 'sglang', 'srt', 'model_runner.py'), patched ? 'import os\nDUMP = os.environ.get("SGLANG_HS_DUMP_DIR")\n' : 'import os\n');
  const py = join(dir, name, 'python');
  await writeFile(py, `#!/bin/sh\nPYTHONPATH='${site}' exec python3 "$@"\n`);
  await chmod(py, 0o755);
  return py;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aerie-dumpenv-'));
  host = new LocalHost({ name: 'local', workdir: join(dir, 'work') });
});
afterAll(async () => {
  await host.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the dump variable probe', () => {
  it('finds the variable in a patched SGLang and not in a stock one', async () => {
    expect((await probeDumpEnv(host, await fakeSglang('patched', true), 'SGLANG_HS_DUMP_DIR')).check).toMatch(/reads SGLANG_HS_DUMP_DIR \(srt\/model_runner\.py\)/);
    const stock = await probeDumpEnv(host, await fakeSglang('stock', false), 'SGLANG_HS_DUMP_DIR');
    expect(stock.problem).toMatch(/never reads SGLANG_HS_DUMP_DIR in any of its 3 Python files: no SGLang release writes hidden-state dumps/);
    expect(stock.problem).toMatch(/Fix: .*stages\.extract\.driver: specforge-offline/);
  });

  it('leaves an interpreter without SGLang to the launcher check, and says when it could not probe', () => {
    expect(judgeDumpEnv({ version: null, package: null, mentions: [], files: 0 }, 'X', '/py')).toEqual({});
    expect(judgeDumpEnv(undefined, 'X', '/py').check).toMatch(/could not probe \/py/);
  });

  it('is a preflight problem for the patched-server driver on a stock server, and passes a patched one', async () => {
    const run = async (python: string) => {
      const config = legacyDemoConfig(join(dir, 'work'), await freePort());
      config.server.launcher = [python, '-m', 'sglang.launch_server'];
      return runPreflight(host, config, `pf-${Math.random().toString(36).slice(2, 8)}`);
    };
    const stock = await run(join(dir, 'stock', 'python'));
    expect(stock.problems.join('\n')).toMatch(/stages\.extract\.dump-env: the extraction server's SGLang .* never reads SGLANG_HS_DUMP_DIR/);
    const patched = await run(join(dir, 'patched', 'python'));
    expect(patched.problems.join('\n')).not.toMatch(/dump-env/);
    expect(patched.checks.join('\n')).toMatch(/stages\.extract\.dump-env: sglang at .* reads SGLANG_HS_DUMP_DIR/);
  });
});
