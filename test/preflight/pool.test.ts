/**
 * Preflight for a generate pool: every server's host is reached and checked (launcher, SGLang
 * release, model), every server's port and GPUs too, and each problem names the server's
 * config path — before anything is launched anywhere.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runPreflight } from '../../src/activities/preflight.js';
import { HostPool } from '../../src/hosts/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { useFakeServers } from '../support/fake-server.js';
import { writeFakeNvidiaSmi } from '../support/fake-nvidia-smi.js';
import { useLocalHost } from '../support/local-host.js';

const local = useLocalHost('aerie-poolpf-');
const listeners = useFakeServers();
const pool = new HostPool();
afterAll(() => pool.closeAll());

describe('preflight with stages.generate.servers', () => {
  it("names each pool server's held port and busy GPUs, on the target host and on another", async () => {
    // Host gpu-b's nvidia-smi: two GPUs, a colleague's job (this test's own pid) on GPU 1.
    const smi = await writeFakeNvidiaSmi(
      join(local.dir, 'bin-b'),
      ['0, GPU-0, NVIDIA H100, 1, 81559', '1, GPU-1, NVIDIA H100, 5000, 81559'],
      [`${process.pid}, GPU-1, 5000`],
    );
    const held = Number(new URL((await listeners.start((_b, res) => res.end())).baseUrl).port);
    const [free1, free2] = [await freePort(), await freePort()];
    const config = demoConfig(join(local.dir, 'a'), await freePort(), (c) => {
      c.hosts['gpu-b'] = { kind: 'local', workdir: join(local.dir, 'b'), 'nvidia-smi': [smi] };
      c.stages.generate.servers = [
        { gpus: [0] },
        { gpus: [1], port: held },
        { host: 'gpu-b', gpus: [1], port: free1 },
        { host: 'gpu-b', gpus: [0], port: held },
        { host: 'gpu-b', gpus: [5], port: free2 },
      ];
    });
    const report = await runPreflight(local.hostAt('a'), config, 'pool-pf', (c, name) => pool.get(c, name));
    const mine = report.problems.filter((p) => p.startsWith('stages.generate.servers'));
    expect(mine).toEqual([
      expect.stringMatching(
        new RegExp(
          `^stages\\.generate\\.servers\\.1\\.port: ${held} on local is held by pid ${process.pid}\\b.*set stages\\.generate\\.servers\\.1\\.port to a free port$`,
        ),
      ),
      expect.stringMatching(
        new RegExp(
          `^stages\\.generate\\.servers\\.2 \\(gpu-b:${free1} GPUs 1\\): GPUs 1 on gpu-b are in use by processes aerie did not start: pid ${process.pid} \\(5000 MiB on GPU 1\\)`,
        ),
      ),
      expect.stringMatching(
        new RegExp(`^stages\\.generate\\.servers\\.3\\.port: ${held} on gpu-b is held by pid ${process.pid}\\b`),
      ),
      `stages.generate.servers.4.gpus: GPU 5 not on gpu-b, which has 0, 1. Fix: list GPUs nvidia-smi shows there`,
    ]);
    // gpu-b itself was checked once: reachable, its run folder, the launcher and release, the model.
    expect(report.checks.filter((c) => c.startsWith('generate server gpu-b')).join('\n')).toMatch(
      /host gpu-b reachable[\s\S]*run folder .*\/b\/runs\/pool-pf writable[\s\S]*SGLang 0\.5\.23/,
    );
  }, 60_000);
});
