// `aerie plan` on a generate pool: one launch per server, each on its host with its port and
// GPUs (the same argv the pool's launches render), and the pool's batching in the notes.
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { planRun } from '../../src/cli/plan.js';

const text = `
hosts:
  gpu-a: { kind: local, workdir: /srv/aerie, gpus: [0, 1, 2, 3] }
  gpu-b: { kind: local, workdir: /srv/other }
target: { model-path: /models/llama, host: gpu-a }
server: { port: 30000, launcher: [/opt/venv/bin/python, -m, sglang.launch_server], sglang-version: 0.5.23 }
stages:
  generate:
    input: /data/prompts.jsonl
    concurrency: 8
    servers: [{ gpus: [0, 1] }, { gpus: [2, 3], port: 30001 }, { host: gpu-b }]
  extract: { driver: specforge-offline }
  train: { draft-model-config: /cfg/draft.json }
`;

describe('aerie plan with stages.generate.servers', () => {
  it('shows one launch per server on its host, port and GPUs, then the pooled regeneration', () => {
    const steps = planRun(parseConfigText(text, 'pool.yaml', {})).filter((s) => s.stage === 'generate');
    expect(steps.map((s) => [s.host, s.step])).toEqual([
      ['gpu-a', 'launch generate server s0 (gpu-a:30000 GPUs 0,1)'],
      ['gpu-a', 'launch generate server s1 (gpu-a:30001 GPUs 2,3)'],
      ['gpu-b', 'launch generate server s2 (gpu-b:30000)'],
      ['gpu-a', 'regenerate assistant turns'],
    ]);
    const port = (i: number) => steps[i]!.argv![steps[i]!.argv!.indexOf('--port') + 1];
    expect([port(0), port(1), port(2)]).toEqual(['30000', '30001', '30000']);
    expect([
      steps[0]!.env!.CUDA_VISIBLE_DEVICES,
      steps[1]!.env!.CUDA_VISIBLE_DEVICES,
      steps[2]!.env!.CUDA_VISIBLE_DEVICES,
    ]).toEqual(['0,1', '2,3', undefined]);
    expect(steps[3]!.notes!.join('\n')).toMatch(
      /8 requests in flight per server.*\n.*a pool of 3 servers: each takes the next batch/,
    );
  });
});

describe('aerie plan with stages.extract.servers', () => {
  it('shows one capture launch per server, each with its own dump folder, then the pool', () => {
    const pooled = text
      .replace(
        '  extract: { driver: specforge-offline }',
        '  extract: { driver: patched-server, servers: [{ gpus: [0, 1] }, { gpus: [2, 3], port: 30001 }] }',
      )
      .replace('    servers: [{ gpus: [0, 1] }, { gpus: [2, 3], port: 30001 }, { host: gpu-b }]\n', '');
    const steps = planRun(parseConfigText(pooled, 'pool.yaml', {})).filter((s) => s.stage === 'extract');
    expect(steps.map((s) => s.step)).toEqual([
      'tokenize as SpecForge does, then check free space',
      'launch extract server s0 (gpu-a:30000 GPUs 0,1)',
      'launch extract server s1 (gpu-a:30001 GPUs 2,3)',
      'extraction pool',
      'prefill every sample',
    ]);
    const dumps = steps.slice(1, 3).map((s) => s.env!.AERIE_HS_DUMP_DIR);
    expect(dumps).toEqual(['/dev/shm/aerie-hs/s0/<run-id>', '/dev/shm/aerie-hs/s1/<run-id>']);
  });
});
