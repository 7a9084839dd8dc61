/**
 * GPU inventory from nvidia-smi's CSV output. Compute processes are classified, not
 * killed: "ours" when the process belongs to a recorded launch group, foreign otherwise
 * (incident 4: a foreign GPU user is reported, never signalled).
 */
import type { ExecResult, GpuInfo, GpuInventory, GpuProcess } from './host.js';

/** The two queries, after the host's nvidia-smi argv (hosts.<name>.nvidia-smi, default ['nvidia-smi']). */
export function nvidiaSmiQueries(nvidiaSmi: readonly string[] = ['nvidia-smi']): { gpus: string[]; apps: string[] } {
  return {
    gpus: [...nvidiaSmi, '--query-gpu=index,uuid,name,memory.used,memory.total', '--format=csv,noheader,nounits'],
    // gpu_uuid ties each process to its GPU: a foreign job on a GPU the run does not use is no obstacle.
    apps: [...nvidiaSmi, '--query-compute-apps=pid,gpu_uuid,used_memory', '--format=csv,noheader,nounits'],
  };
}

/** Memory nvidia-smi reports as "[N/A]" or "[Not Supported]" (e.g. unified-memory GPUs, some containers). */
export const UNKNOWN_MIB = -1;

function mib(field: string): number {
  const t = field.trim();
  return /^\d+(\.\d+)?$/.test(t) ? Math.round(Number(t)) : UNKNOWN_MIB;
}

/** `index, uuid, name, memory.used, memory.total` lines; the name may itself contain ", ". */
export function parseGpuQuery(text: string): GpuInfo[] {
  const gpus: GpuInfo[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(',');
    if (f.length < 5 || !/^\s*\d+\s*$/.test(f[0])) continue;
    gpus.push({
      index: Number(f[0]),
      uuid: f[1].trim(),
      name: f.slice(2, -2).join(',').trim(),
      memoryUsedMiB: mib(f[f.length - 2]),
      memoryTotalMiB: mib(f[f.length - 1]),
    });
  }
  return gpus;
}

export interface ComputeApp {
  pid: number;
  gpuUuid: string;
  usedMemoryMiB: number;
}

/**
 * `pid, gpu_uuid, used_memory` lines. A row whose pid is not a number (some containers print
 * "[N/A]") is dropped: a GpuProcess pid must be safe to compare, and 0 or -1 must never
 * reach anything that signals.
 */
export function parseComputeApps(text: string): ComputeApp[] {
  const apps: ComputeApp[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(',');
    if (f.length < 3 || !/^\s*\d+\s*$/.test(f[0])) continue;
    const pid = Number(f[0]);
    if (pid <= 1) continue;
    apps.push({ pid, gpuUuid: f[1].trim(), usedMemoryMiB: mib(f[2]) });
  }
  return apps;
}

function firstLine(r: ExecResult): string {
  return (r.stderr.trim() || r.stdout.trim()).split('\n')[0] ?? '';
}

/**
 * The inventory from the two nvidia-smi runs. `apps` is null when the second query was
 * not run or failed (GPUs are still reported). `isOurs(pid)` decides ownership.
 */
export function gpuInventoryFrom(
  hostName: string,
  gpusRun: ExecResult,
  appsRun: ExecResult | null,
  isOurs: (pid: number) => boolean,
): GpuInventory {
  if (gpusRun.code === 127)
    return { available: false, reason: `nvidia-smi not found on ${hostName}`, gpus: [], processes: [] };
  if (gpusRun.code !== 0) {
    const why = firstLine(gpusRun) || `exit code ${gpusRun.code ?? gpusRun.signal}`;
    return { available: false, reason: `nvidia-smi failed on ${hostName}: ${why}`, gpus: [], processes: [] };
  }
  const gpus = parseGpuQuery(gpusRun.stdout);
  const indexOf = new Map(gpus.map((g) => [g.uuid, g.index]));
  const apps = appsRun && appsRun.code === 0 ? parseComputeApps(appsRun.stdout) : [];
  const processes: GpuProcess[] = apps.map((a) => ({
    pid: a.pid,
    usedMemoryMiB: a.usedMemoryMiB,
    gpuIndex: indexOf.get(a.gpuUuid) ?? null,
    ours: isOurs(a.pid),
  }));
  return { available: true, gpus, processes };
}
