/**
 * The whole pipeline on the simulator through a real OpenSSH server on loopback
 * (examples/demo-ssh.yaml pointed at the test's sshd): every command, file and HTTP call
 * goes over SSH. Midway through the generate server's readiness polling the sshd session
 * serving aerie is killed; the run still finishes.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AERIE_HOME, loadConfigFile } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { SshHost } from '../../src/hosts/ssh/ssh-host.js';
import { TASK_QUEUE, type PipelineInput, type PipelineResult } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';
import { ALL_STAGES_DONE, stageStates } from '../support/stages.js';
import { useSshFixture } from '../support/ssh-fixture.js';

const suite = useTemporalSuite('aerie-e2e-ssh-');
// Its afterAll runs before the suite's: what the run left on the (loopback) host is stopped by its launch record.
const ssh = useSshFixture();

async function sshDemoConfig(workdir: string): Promise<Config> {
  const c = await loadConfigFile(join(AERIE_HOME, 'examples', 'demo-ssh.yaml'));
  const gpu = c.hosts.gpu!;
  if (gpu.kind !== 'ssh') throw new Error('demo-ssh.yaml must define an ssh host named gpu');
  gpu.ssh = { ...gpu.ssh, host: ssh.fx.alias, port: undefined, user: undefined, 'config-file': ssh.fx.sshConfig };
  gpu.workdir = workdir;
  c.server.port = await freePort();
  if (c.stages.extract.driver === 'patched-server') c.stages.extract['dump-dir'] = join(workdir, 'shm');
  c.stages.benchmark.concurrencies = [1, 4, 16];
  c.stages.benchmark['output-len'] = 32;
  c.run.label = 'test-ssh';
  return c;
}

describe('pipeline end to end over SSH', () => {
  it('runs every stage through the real sshd, surviving a dropped connection while polling readiness', async () => {
    const workdir = join(ssh.fx.dir, 'remote-work');
    const config = await sshDemoConfig(workdir);
    const runId = `e2e-ssh-${Date.now()}`;
    const input: PipelineInput = { runId, config, configPath: 'examples/demo-ssh.yaml' };
    const { result, stats } = await suite.t.withWorker(async (hosts) => {
      const handle = await suite.t.client.workflow.start(pipeline, {
        taskQueue: TASK_QUEUE,
        workflowId: runId,
        args: [input],
      });
      // Drop the SSH link once the generate server is launched and being polled.
      const logs = join(workdir, 'runs', runId, 'logs');
      await waitUntil(
        async () => (await readdir(logs).catch(() => [] as string[])).some((f) => f.startsWith('server-generate')),
        'the generate server launch',
        120_000,
        100,
      );
      const dropped = await ssh.fx.sshd.dropConnections();
      expect(dropped.length).toBeGreaterThan(0);
      const done = (await handle.result()) as PipelineResult;
      const host = hosts.get(config);
      expect(host).toBeInstanceOf(SshHost);
      return { result: done, stats: { ...(host as SshHost).link.stats } };
    });

    expect(stageStates(result)).toEqual(ALL_STAGES_DONE);
    expect(stats.drops).toBeGreaterThanOrEqual(1);
    expect(stats.connects).toBeGreaterThanOrEqual(2);
    expect(result.report?.table).toMatch(/speedup/i);
    const results = (await readFile(join(workdir, 'runs', runId, 'bench', 'results.jsonl'), 'utf8')).trim().split('\n');
    expect(results).toHaveLength(6);
    const launches = (await readdir(join(workdir, '.aerie', 'procs'))).filter((f) => f.endsWith('.json')).sort();
    expect(launches).toEqual(
      [
        `${runId}.server-generate.0`,
        `${runId}.extract.0`,
        `${runId}.train.0`,
        `${runId}.train-export.0`,
        `${runId}.server-deploy.0`,
      ]
        .map((id) => `${id}.json`)
        .sort(),
    );
  }, 400_000);
});
