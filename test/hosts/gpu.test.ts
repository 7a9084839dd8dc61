import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ExecResult, ProcRecord } from '../../src/hosts/host.js';
import { gpuInventoryFrom, parseComputeApps, parseGpuQuery, UNKNOWN_MIB } from '../../src/hosts/gpu.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { groupMembers, startUnrelated, stopAll, until } from './proc-helpers.js';
import { writeFakeNvidiaSmi } from '../support/fake-nvidia-smi.js';
import { useLocalHost } from '../support/local-host.js';

const UUID = [
  'GPU-0a1b2c3d-0000-4000-8000-000000000000',
  'GPU-0a1b2c3d-1111-4000-8000-000000000001',
  'GPU-0a1b2c3d-2222-4000-8000-000000000002',
  'GPU-0a1b2c3d-3333-4000-8000-000000000003',
];
const GPUS = `0, ${UUID[0]}, NVIDIA H100 80GB HBM3, 75431, 81559
1, ${UUID[1]}, NVIDIA H100 80GB HBM3, 4, 81559
2, ${UUID[2]}, NVIDIA GB10, [N/A], [N/A]
3, ${UUID[3]}, NVIDIA A100-SXM4-80GB, [Not Supported], 81920
`;
const APPS = `1234567, ${UUID[0]}, 75410
2345678, ${UUID[2]}, [N/A]
[N/A], ${UUID[1]}, 512
3456789, GPU-unknown-to-the-gpu-query, [Not Supported]
`;
const ok = (stdout: string): ExecResult => ({ code: 0, signal: null, stdout, stderr: '' });

describe('nvidia-smi parsers (golden)', () => {
  it('parses GPUs, unknown memory as UNKNOWN_MIB', () => {
    expect(parseGpuQuery(GPUS)).toEqual([
      { index: 0, uuid: UUID[0], name: 'NVIDIA H100 80GB HBM3', memoryUsedMiB: 75431, memoryTotalMiB: 81559 },
      { index: 1, uuid: UUID[1], name: 'NVIDIA H100 80GB HBM3', memoryUsedMiB: 4, memoryTotalMiB: 81559 },
      { index: 2, uuid: UUID[2], name: 'NVIDIA GB10', memoryUsedMiB: UNKNOWN_MIB, memoryTotalMiB: UNKNOWN_MIB },
      { index: 3, uuid: UUID[3], name: 'NVIDIA A100-SXM4-80GB', memoryUsedMiB: UNKNOWN_MIB, memoryTotalMiB: 81920 },
    ]);
  });
  it('keeps a GPU name that contains a comma', () => {
    expect(parseGpuQuery('0, GPU-x, Odd, Name, 1, 2\n')[0].name).toBe('Odd, Name');
  });
  it('parses compute processes and drops rows without a usable pid', () => {
    expect(parseComputeApps(APPS)).toEqual([
      { pid: 1234567, gpuUuid: UUID[0], usedMemoryMiB: 75410 },
      { pid: 2345678, gpuUuid: UUID[2], usedMemoryMiB: UNKNOWN_MIB },
      { pid: 3456789, gpuUuid: 'GPU-unknown-to-the-gpu-query', usedMemoryMiB: UNKNOWN_MIB },
    ]);
    expect(parseComputeApps('')).toEqual([]);
    expect(parseComputeApps('No running processes found\n')).toEqual([]);
  });
});

describe('gpuInventoryFrom', () => {
  it('reports a missing nvidia-smi by host name', () => {
    const notFound: ExecResult = { code: 127, signal: null, stdout: '', stderr: 'nvidia-smi: command not found\n' };
    expect(gpuInventoryFrom('gpu-a', notFound, null, () => false)).toEqual({
      available: false,
      reason: 'nvidia-smi not found on gpu-a',
      gpus: [],
      processes: [],
    });
  });
  it('reports a driver failure with nvidia-smi’s own words', () => {
    const failed: ExecResult = {
      code: 9,
      signal: null,
      stderr: '',
      stdout:
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n\n",
    };
    expect(gpuInventoryFrom('gpu-a', failed, null, () => false).reason).toBe(
      "nvidia-smi failed on gpu-a: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.",
    );
  });
  it('classifies processes as ours or foreign', () => {
    const inv = gpuInventoryFrom('gpu-a', ok(GPUS), ok(APPS), (pid) => pid === 2345678);
    expect(inv.available).toBe(true);
    expect(inv.gpus).toHaveLength(4);
    // Each process on its GPU by uuid; a uuid no GPU row has stays unplaced (null).
    expect(inv.processes.map((p) => [p.pid, p.gpuIndex, p.ours])).toEqual([
      [1234567, 0, false],
      [2345678, 2, true],
      [3456789, null, false],
    ]);
  });
});

describe('LocalHost.gpuInventory', () => {
  const fx = useLocalHost('aerie-gpu-', { each: true, sub: 'work', name: 'box' });
  let dir: string;
  let savedPath: string | undefined;
  let host: LocalHost;
  let unrelated: ProcRecord[];
  beforeEach(async () => {
    ({ dir, host } = fx);
    await mkdir(join(dir, 'bin'));
    savedPath = process.env.PATH;
    unrelated = [];
  });
  afterEach(async () => {
    process.env.PATH = savedPath;
    await stopAll(host, await host.listLaunches());
    await stopAll(host, unrelated);
  });

  it('says nvidia-smi is not found when it is not on PATH', async () => {
    process.env.PATH = join(dir, 'bin'); // empty directory
    expect(await host.gpuInventory()).toEqual({
      available: false,
      reason: 'nvidia-smi not found on box',
      gpus: [],
      processes: [],
    });
  });

  it('marks a process in a recorded launch group as ours and any other as foreign', async () => {
    const { record } = await host.spawnDetached('r.server.0', ['sh', '-c', 'sleep 60 & wait'], {
      logPath: join(dir, 's.log'),
    });
    const members = await until('the sleep child', async () => {
      const m = await groupMembers(record.pgid);
      return m.length === 3 ? m : null;
    });
    const child = members.find((m) => m.pid !== record.pid && m.comm === 'sleep')!;
    const foreign = await startUnrelated(['sleep', '60']);
    unrelated.push(foreign);

    await writeFakeNvidiaSmi(
      join(dir, 'bin'),
      [`0, ${UUID[0]}, NVIDIA H100 80GB HBM3, 75431, 81559`],
      [`${child.pid}, ${UUID[0]}, 70000`, `${foreign.pid}, ${UUID[0]}, 5000`],
    );
    process.env.PATH = `${join(dir, 'bin')}:${savedPath}`;

    const inv = await host.gpuInventory();
    expect(inv.available).toBe(true);
    expect(inv.gpus).toEqual([
      { index: 0, uuid: UUID[0], name: 'NVIDIA H100 80GB HBM3', memoryUsedMiB: 75431, memoryTotalMiB: 81559 },
    ]);
    expect(inv.processes).toEqual([
      { pid: child.pid, usedMemoryMiB: 70000, gpuIndex: 0, ours: true },
      { pid: foreign.pid, usedMemoryMiB: 5000, gpuIndex: 0, ours: false },
    ]);
  });
});
