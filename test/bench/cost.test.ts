// GPU-hours from launch records: wall time (startedAt → exit file) × GPUs held, per stage.
import { describe, expect, it } from 'vitest';
import { costLines, formatGpuHours, launchGpus, runCost, stageOfLaunch } from '../../src/bench/cost.js';
import type { ProcRecord } from '../../src/hosts/host.js';

const rec = (launchId: string, startedAt: string, argv: string[]): ProcRecord =>
  ({
    launchId,
    startedAt,
    argv,
    pid: 1,
    pgid: 1,
    startTime: '1',
    argvHash: '',
    logPath: '',
    exitPath: '',
    host: 'h',
  }) as ProcRecord;
const T0 = Date.parse('2026-12-02T00:00:00.000Z');

describe('GPU-hours', () => {
  it('maps launch roles to stages', () => {
    expect(stageOfLaunch('r1.server-generate.0', 'r1')).toBe('generate');
    expect(stageOfLaunch('r1.server-extract.2', 'r1')).toBe('extract');
    expect(stageOfLaunch('r1.train-export.0', 'r1')).toBe('train');
    expect(stageOfLaunch('r1.server-deploy.0', 'r1')).toBe('deploy');
    expect(stageOfLaunch('r1.server-baseline.0', 'r1')).toBe('benchmark');
    expect(stageOfLaunch('r2.server-deploy.0', 'r1')).toBeUndefined();
  });

  it('GPUs: the host set when configured, else tp × dp or nproc_per_node, else 1 assumed', () => {
    expect(launchGpus(['python', '-m', 'sglang.launch_server', '--tp-size', '2'], [0, 1, 2, 3])).toEqual({
      gpus: 4,
      gpusFrom: 'host gpu set',
    });
    expect(launchGpus(['x', '--tp-size', '4', '--dp-size=2'], undefined)).toEqual({ gpus: 8, gpusFrom: 'argv' });
    expect(launchGpus(['torchrun', '--nproc_per_node', '8', 'train.py'], undefined)).toEqual({
      gpus: 8,
      gpusFrom: 'argv',
    });
    expect(launchGpus(['specforge', 'train'], undefined)).toEqual({ gpus: 1, gpusFrom: 'assumed' });
  });

  it('sums wall time × GPUs per stage; a launch still running counts up to now', () => {
    const c = runCost(
      'r1',
      [
        // 30 min on tp 2 → 1 GPU-h
        {
          record: rec('r1.server-generate.0', new Date(T0).toISOString(), ['s', '--tp-size', '2']),
          endedAtMs: T0 + 1_800_000,
        },
        // 1 h of torchrun on 8 → 8 GPU-h
        {
          record: rec('r1.train.0', new Date(T0 + 3_600_000).toISOString(), ['torchrun', '--nproc_per_node', '8']),
          endedAtMs: T0 + 7_200_000,
        },
        // still running: 15 min so far on 1 (assumed)
        { record: rec('r1.server-deploy.0', new Date(T0 + 7_200_000).toISOString(), ['s']) },
        { record: rec('other.train.0', new Date(T0).toISOString(), ['t']), endedAtMs: T0 + 1 },
      ],
      undefined,
      T0 + 8_100_000,
    );
    expect(c.stages.map((s) => [s.stage, s.gpuHours])).toEqual([
      ['generate', 1],
      ['train', 8],
      ['deploy', 0.25],
    ]);
    expect(c.totalGpuHours).toBe(9.25);
    expect(c.launches.find((l) => l.stage === 'deploy')!.endedAt).toBeNull();
    expect(costLines(c)[0]).toBe(
      'GPU-hours: 9.25 GPU-h in all (generate 1.00 GPU-h, train 8.00 GPU-h, deploy 0.250 GPU-h).',
    );
    expect(costLines(c)[1]).toContain('1 GPU assumed for r1.server-deploy.0');
    expect(formatGpuHours(0.000123)).toBe('0.000123 GPU-h');
  });
});
