/**
 * A GPU host whose servers run in a container with its own network namespace: the exec
 * prefix enters the namespace (`ip netns exec`), the server listens on the namespace's
 * address (server.listen-host) and aerie's HTTP is forwarded there over SSH
 * (hosts.<name>.http-address). The namespace, its veth pair and addresses are created by
 * this test and removed after it; nothing outside loopback and that namespace is reached.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AERIE_HOME, loadConfigFile } from '../../src/config/load.js';
import { TASK_QUEUE, type PipelineInput, type PipelineResult } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { freePort, portOpen } from '../../src/temporal/dev-server.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';
import { ALL_STAGES_DONE, stageStates } from '../support/stages.js';
import { useSshFixture } from '../support/ssh-fixture.js';
import { runOk } from '../support/processes.js';

const ip = (...args: string[]) => runOk('ip', args, { timeoutMs: 30_000 });

// Unique per test process: names ≤ 15 characters for the links, a /30 of 10.231.0.0/16 for the pair.
const tag = (process.pid % 100_000).toString(36);
const NS = `aerie-ns-${tag}`;
const HOST_END = `aerh${tag}`;
const NS_END = `aern${tag}`;
const subnet = process.pid % 16_000;
const HOST_ADDR = `10.231.${Math.floor(subnet / 64)}.${(subnet % 64) * 4 + 1}`;
const NS_ADDR = `10.231.${Math.floor(subnet / 64)}.${(subnet % 64) * 4 + 2}`;

let nsCreated = false;

async function createNamespace(): Promise<void> {
  await ip('netns', 'add', NS);
  nsCreated = true;
  await ip('link', 'add', HOST_END, 'type', 'veth', 'peer', 'name', NS_END);
  await ip('link', 'set', NS_END, 'netns', NS);
  await ip('addr', 'add', `${HOST_ADDR}/30`, 'dev', HOST_END);
  await ip('link', 'set', HOST_END, 'up');
  await ip('netns', 'exec', NS, 'ip', 'addr', 'add', `${NS_ADDR}/30`, 'dev', NS_END);
  await ip('netns', 'exec', NS, 'ip', 'link', 'set', NS_END, 'up');
  await ip('netns', 'exec', NS, 'ip', 'link', 'set', 'lo', 'up');
}

const suite = useTemporalSuite('aerie-e2e-netns-');
beforeAll(createNamespace, 120_000);
afterAll(async () => {
  // Deleting the namespace removes both ends of the veth pair with it.
  if (nsCreated) await ip('netns', 'del', NS).catch(() => undefined);
});
// Its afterAll runs before the namespace goes: what the run left on the host is stopped by its launch record.
const ssh = useSshFixture();

describe('a host whose servers live in their own network namespace', () => {
  it('forwards to the namespace address: the run completes while the port is closed on the host itself', async () => {
    const workdir = join(ssh.fx.dir, 'remote-work');
    const config = await loadConfigFile(join(AERIE_HOME, 'examples', 'demo-ssh.yaml'));
    const gpu = config.hosts.gpu!;
    if (gpu.kind !== 'ssh') throw new Error('demo-ssh.yaml must define an ssh host named gpu');
    gpu.ssh = { ...gpu.ssh, host: ssh.fx.alias, port: undefined, user: undefined, 'config-file': ssh.fx.sshConfig };
    gpu['exec-prefix'] = ['ip', 'netns', 'exec', NS];
    gpu['http-address'] = NS_ADDR;
    gpu.workdir = workdir;
    config.server['listen-host'] = NS_ADDR;
    config.server.port = await freePort();
    if (config.stages.extract.driver === 'patched-server') config.stages.extract['dump-dir'] = join(workdir, 'shm');
    config.stages.benchmark.concurrencies = [1, 4];
    config.stages.benchmark['output-len'] = 32;

    const runId = `e2e-netns-${Date.now()}`;
    const input: PipelineInput = { runId, config, configPath: 'examples/demo-ssh.yaml' };
    const result = (await suite.t.withWorker(async () => {
      const handle = await suite.t.client.workflow.start(pipeline, {
        taskQueue: TASK_QUEUE,
        workflowId: runId,
        args: [input],
      });
      // While the generate server serves, its port is open in the namespace and closed on the host's loopback.
      const logs = join(workdir, 'runs', runId, 'logs');
      await waitUntil(
        async () => {
          for (const f of await readdir(logs).catch(() => [] as string[])) {
            if (
              f.startsWith('server-generate') &&
              (await readFile(join(logs, f), 'utf8')).includes('The server is fired up')
            )
              return true;
          }
          return false;
        },
        'the generate server to be ready',
        120_000,
        100,
      );
      expect(await portOpen(config.server.port, '127.0.0.1')).toBe(false);
      return handle.result();
    })) as PipelineResult;

    expect(stageStates(result)).toEqual(ALL_STAGES_DONE);
    const serverLog = (await readdir(join(workdir, 'runs', runId, 'logs'))).find((f) => f.startsWith('server-deploy'))!;
    expect(await readFile(join(workdir, 'runs', runId, 'logs', serverLog), 'utf8')).toContain(
      `Uvicorn running on http://${NS_ADDR}:${config.server.port}`,
    );
  }, 400_000);
});
