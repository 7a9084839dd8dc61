/**
 * hosts.<name>.gpus on a shared GPU host: foreign processes block the run only on its own
 * GPUs, every launch is confined to them, and a stage env cannot contradict them.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { judgeGpus, runPreflight } from '../../src/activities/preflight.js';
import { planRun } from '../../src/cli/plan.js';
import { ConfigError, parseConfigText } from '../../src/config/load.js';
import type { GpuInventory } from '../../src/hosts/host.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { useLocalHost } from '../support/local-host.js';
import { writeFakeNvidiaSmi } from '../support/fake-nvidia-smi.js';

const gpu = (index: number) => ({
  index,
  uuid: `GPU-${index}`,
  name: 'NVIDIA H100 80GB HBM3',
  memoryUsedMiB: 0,
  memoryTotalMiB: 81559,
});
const inv = (processes: GpuInventory['processes']): GpuInventory => ({
  available: true,
  gpus: [0, 1, 2, 3].map(gpu),
  processes,
});

describe('judgeGpus', () => {
  it('without a GPU list, any foreign process blocks, naming its GPU', () => {
    const v = judgeGpus(
      inv([{ pid: 4242, usedMemoryMiB: 5000, gpuIndex: 3, ours: false }]),
      undefined,
      'hosts.gpu8.gpus',
      'gpu8',
    );
    expect(v.problems).toHaveLength(1);
    expect(v.problems[0]).toMatch(
      /^GPUs on gpu8 are in use by processes aerie did not start: pid 4242 \(5000 MiB on GPU 3\)/,
    );
    expect(v.problems[0]).toContain('or list the free GPUs in hosts.gpu8.gpus');
  });

  it('with a GPU list, a foreign process elsewhere is reported and left alone; one on our GPUs blocks', () => {
    const elsewhere = judgeGpus(
      inv([{ pid: 4242, usedMemoryMiB: 5000, gpuIndex: 3, ours: false }]),
      [0, 1],
      'hosts.gpu8.gpus',
      'gpu8',
    );
    expect(elsewhere.problems).toEqual([]);
    expect(elsewhere.checks).toEqual(['GPUs 0, 1 free', 'other GPUs in use, left alone: pid 4242 (5000 MiB on GPU 3)']);

    const ours = judgeGpus(
      inv([{ pid: 4243, usedMemoryMiB: 7000, gpuIndex: 1, ours: false }]),
      [0, 1],
      'hosts.gpu8.gpus',
      'gpu8',
    );
    expect(ours.problems).toEqual([
      expect.stringMatching(
        /^GPUs 0, 1 on gpu8 are in use by processes aerie did not start: pid 4243 \(7000 MiB on GPU 1\).*or choose other GPUs in hosts\.gpu8\.gpus$/,
      ),
    ]);
  });

  it('a process nvidia-smi could not place counts as on our GPUs; our own processes never block', () => {
    const v = judgeGpus(
      inv([
        { pid: 11, usedMemoryMiB: 100, gpuIndex: null, ours: false },
        { pid: 12, usedMemoryMiB: 100, gpuIndex: 0, ours: true },
      ]),
      [0],
      'hosts.gpu8.gpus',
      'gpu8',
    );
    expect(v.problems).toEqual([expect.stringContaining('pid 11 (100 MiB)')]);
    expect(v.problems[0]).not.toContain('pid 12');
  });

  it('names GPUs the host does not have', () => {
    const v = judgeGpus(inv([]), [2, 9], 'hosts.gpu8.gpus', 'gpu8');
    expect(v.problems).toEqual([
      'hosts.gpu8.gpus: GPU 9 not on gpu8, which has 0, 1, 2, 3. Fix: list GPUs nvidia-smi shows there',
    ]);
  });
});

describe('hosts.<name>.gpus end to end', () => {
  const local = useLocalHost('aerie-gpus-');
  let work: string;
  let savedPath: string | undefined;
  beforeAll(() => {
    work = local.dir;
    savedPath = process.env.PATH;
  });
  afterAll(() => {
    process.env.PATH = savedPath;
  });

  it('preflight passes with a foreign job on another GPU, and every launch gets CUDA_VISIBLE_DEVICES', async () => {
    // nvidia-smi as the host has it: 4 GPUs, a "colleague's" process on GPU 3 (this test's own pid: preflight only reports it).
    await writeFakeNvidiaSmi(
      join(work, 'bin'),
      [
        '0, GPU-0, NVIDIA H100, 1, 81559',
        '1, GPU-1, NVIDIA H100, 1, 81559',
        '2, GPU-2, NVIDIA H100, 1, 81559',
        '3, GPU-3, NVIDIA H100, 5000, 81559',
      ],
      [`${process.pid}, GPU-3, 5000`],
    );
    process.env.PATH = `${join(work, 'bin')}:${savedPath}`;

    const workdir = join(work, 'host');
    const config = demoConfig(workdir, await freePort());
    const all = await runPreflight(local.hostAt('host'), config, 'gpus-all');
    expect(all.problems).toEqual([expect.stringContaining(`pid ${process.pid} (5000 MiB on GPU 3)`)]);

    config.hosts.local!.gpus = [0, 1];
    const scoped = await runPreflight(local.hostAt('host'), config, 'gpus-scoped');
    expect(scoped.problems).toEqual([]);
    expect(scoped.checks).toContain(`other GPUs in use, left alone: pid ${process.pid} (5000 MiB on GPU 3)`);

    const launches = planRun(config, 'r1').filter((s) => s.step.startsWith('launch') || s.step.includes('detached'));
    expect(launches.length).toBeGreaterThanOrEqual(4);
    for (const s of launches) expect(s.env?.CUDA_VISIBLE_DEVICES).toBe('0,1');
  });

  it('refuses a stage env that sets CUDA_VISIBLE_DEVICES beside hosts.<name>.gpus', () => {
    const text = `
hosts:
  gpu: { kind: local, workdir: /srv/aerie, gpus: [0, 1] }
target: { model-path: /models/llama, host: gpu }
server: { env: { CUDA_VISIBLE_DEVICES: "2,3" } }
stages:
  generate: { input: /data/prompts.jsonl }
  extract: { dump-dir: /dev/shm/sglang_hs }
  train: { draft-model-config: /cfg/draft.json }
`;
    let err: unknown;
    try {
      parseConfigText(text, 'bad.yaml', {});
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect(String((err as Error).message)).toMatch(
      /server\.env\.CUDA_VISIBLE_DEVICES: conflicts with hosts\.gpu\.gpus/,
    );
    expect(() =>
      parseConfigText(
        text.replace('gpus: [0, 1]', 'gpus: [1, 1]').replace('server: { env: { CUDA_VISIBLE_DEVICES: "2,3" } }\n', ''),
        'dup.yaml',
        {},
      ),
    ).toThrow(/hosts\.gpu\.gpus: lists a GPU twice/);
  });
});
