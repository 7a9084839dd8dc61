/** The aerie command as a researcher meets it: a real process, real files. */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AERIE_HOME } from '../../src/config/load.js';
import { devServerArgv } from '../../src/temporal/dev-server.js';
import { useWorkdir } from '../support/workdir.js';
import { run } from '../support/processes.js';

const tmp = useWorkdir('aerie-cli-');

async function aerie(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = await run(process.execPath, [join(AERIE_HOME, 'bin', 'aerie.mjs'), ...args], {
    cwd: tmp.path,
    // Never reach a real server from these tests: a config error must stop before Temporal.
    env: { AERIE_STATE_DIR: join(tmp.path, 'state'), TEMPORAL_ADDRESS: '127.0.0.1:9' },
    timeoutMs: 60_000,
  });
  return { code: r.code ?? -1, stdout: r.stdout, stderr: r.stderr };
}

describe('aerie CLI', () => {
  it('prints every config mistake with its field path and exits 2 before touching Temporal', async () => {
    const path = join(tmp.path, 'bad.yaml');
    await writeFile(
      path,
      `hosts: { gpu: { kind: local, workdir: relative/dir } }
target: { model-path: /m, host: gpu-b }
server: { port: 0 }
stages:
  generate: { input: /d.jsonl, concurency: 8 }
  extract: { dump-env: SGLANG_HS_DUMP_DIR, dump-dir: /dev/shm/x }
  train: { draft-model-config: /c.json }
  deploy: { speculative-algorithm: EAGLE }
`,
    );
    const r = await aerie(['run', path]);
    expect(r.code).toBe(2);
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('  - '));
    expect(lines).toHaveLength(6);
    expect(r.stderr).toContain('hosts.gpu.workdir: must be an absolute path');
    expect(r.stderr).toContain('target.host: names no host');
    expect(r.stderr).toContain('server.port:');
    expect(r.stderr).toContain('stages.generate.concurency: unknown key — did you mean "concurrency"?');
    expect(r.stderr).toContain('stages.deploy.speculative-algorithm: EAGLE cannot serve the EAGLE-3 drafter');
    // SGLANG_HS_DUMP_DIR exists in no SGLang release: aerie's own capture replaced it
    expect(r.stderr).toContain('stages.extract.dump-env: dump-env is gone');
  });

  it('writes the JSON Schema for editor completion', async () => {
    const out = join(tmp.path, 'schema.json');
    const r = await aerie(['schema', out]);
    expect(r.code).toBe(0);
    const schema = JSON.parse(await readFile(out, 'utf8')) as { properties: Record<string, unknown> };
    expect(Object.keys(schema.properties)).toContain('stages');
  });

  it('says in one line that Temporal does not answer and how to fix it, without a stack', async () => {
    const r = await aerie(['status', 'some-run']);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(
      /^aerie: cannot reach Temporal at 127\.0\.0\.1:9 \(.+\): it came from TEMPORAL_ADDRESS .*Fix: /,
    );
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });

  it('explains usage for an unknown command', async () => {
    const r = await aerie(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "frobnicate"');
    expect(r.stderr).toContain('aerie run <config.yaml>');
  });
});

describe('dev server argv', () => {
  it('persists to SQLite, binds loopback and registers aerie search attributes', () => {
    expect(devServerArgv({ port: 7233, uiPort: 8233, dbPath: '/s/aerie.sqlite' })).toEqual([
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      '7233',
      '--db-filename',
      '/s/aerie.sqlite',
      '--log-level',
      'warn',
      '--ui-port',
      '8233',
      '--search-attribute',
      'AerieStage=Keyword',
      '--search-attribute',
      'AerieTarget=Keyword',
      '--search-attribute',
      'AerieLabel=Keyword',
    ]);
  });
});
