/**
 * `aerie run` as a user meets it when preflight refuses the config: a real process with its
 * in-process worker against a real Temporal dev server. The terminal holds the stage table
 * and the reason; the SDK's warnings (stack traces, task tokens) go to the run folder's
 * worker.log.
 */
import { spawn } from 'node:child_process';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { AERIE_HOME } from '../../src/config/load.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { signalGroup } from '../support/processes.js';
import { useTemporalSuite } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-run-quiet-');
let pgid: number | undefined;

// Registered after the suite's, so it runs first: the `aerie run` process goes before the dev server.
afterAll(() => {
  if (pgid !== undefined) signalGroup(pgid, 'SIGKILL');
});

/** The demo config on this test's own workdir and port, with a target model that is not there. */
async function configWithMissingTarget(): Promise<string> {
  type Section = Record<string, unknown>;
  const doc = YAML.parse(await readFile(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8')) as {
    run: Section;
    hosts: { local: Section };
    target: Section;
    server: Section;
    stages: { extract: Section };
  };
  doc.hosts.local.workdir = join(suite.work, 'host');
  doc.target['model-path'] = join(suite.work, 'no-such-model');
  doc.server.port = await freePort();
  doc.stages.extract['dump-dir'] = join(suite.work, 'host', 'dumps');
  doc.run.label = 'quiet';
  const path = join(suite.work, 'missing-target.yaml');
  await writeFile(path, YAML.stringify(doc));
  return path;
}

/**
 * `aerie run` in its own process group, stdout and stderr together as a terminal shows them. Spawned here
 * because the process is the subject: the test reads what a user's terminal would show of it.
 */
function aerieRun(config: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(AERIE_HOME, 'bin', 'aerie.mjs'), 'run', config], {
      cwd: suite.work,
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: suite.t.server.address,
        TEMPORAL_NAMESPACE: 'default',
        AERIE_STATE_DIR: join(suite.work, 'state'),
      },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    pgid = child.pid;
    let output = '';
    child.stdout.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr.on('data', (b: Buffer) => (output += b.toString()));
    const limit = setTimeout(() => {
      signalGroup(child.pid!, 'SIGKILL');
      reject(new Error(`aerie run did not end within 45 s; it printed:\n${output}`));
    }, 45_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(limit);
      pgid = undefined;
      resolve({ code, output });
    });
  });
}

describe('aerie run when preflight fails', () => {
  it('prints the stage table and the reason, and leaves the SDK warnings in the run folder', async () => {
    const { code, output } = await aerieRun(await configWithMissingTarget());
    expect(code).toBe(1);

    const runId = /^run (quiet-\S+)$/m.exec(output)?.[1];
    expect(runId, output).toBeDefined();
    // The table: the failed stage on one line, the rest pending.
    expect(output).toMatch(/^ {2}✗ preflight +failed +preflight found \d+ problems?/m);
    for (const stage of ['generate', 'extract', 'train', 'deploy', 'benchmark'])
      expect(output).toMatch(new RegExp(`^  · ${stage} +pending$`, 'm'));
    // The reason, with the field to fix, and where the details are.
    expect(output).toMatch(new RegExp(`^run ${runId} failed: preflight found`, 'm'));
    expect(output).toContain(`target.model-path: ${join(suite.work, 'no-such-model')}`);
    const logPath = join('state', 'runs', runId!, 'worker.log');
    expect(output).toContain(`details: ${logPath}`);
    expect(output).toContain(`aerie resume ${runId}`);

    // Nothing of the SDK's on the terminal.
    for (const noise of ['ActivityFailure', 'ApplicationFailure', 'taskToken', '[WARN]', 'sdkComponent', 'webpack'])
      expect(output, output).not.toContain(noise);
    expect(output, output).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);
    // No phase line with nothing after the stage, and no ledger wording for a stage starting.
    expect(output, output).not.toMatch(/^ {2}\d\d:\d\d:\d\d \w+: *$/m);
    expect(output).not.toContain('not done yet');

    // The log file has what was left out: the SDK's warning with the failure's type and stack.
    const log = await readFile(join(suite.work, logPath), 'utf8');
    expect(log).toContain('[WARN] Activity failed');
    expect(log).toContain('taskToken');
    expect(log).toContain("type: 'PreflightFailed'");
    expect(log).toMatch(/^\s+at .+preflight\.[jt]s:\d+:\d+\)?$/m);
    // Nothing was launched on the host.
    expect(await readdir(join(suite.work, 'host', '.aerie', 'procs')).catch(() => [])).toEqual([]);
  }, 60_000);
});
