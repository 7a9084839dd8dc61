/**
 * The simulated host's GPUs. Simulated servers and trainers register the GPU memory they hold
 * in AERIE_SIM_GPU_DIR (one file per process); `aerie-sim nvidia-smi` reads it back the way
 * the driver reports compute processes. A process that dies holds nothing, as with the real
 * driver, so the files of dead pids are ignored. Without AERIE_SIM_GPU_DIR nothing is
 * registered: simulators in unrelated tests never see each other.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const GPU_NAME = 'NVIDIA H100 80GB HBM3';
export const GPU_TOTAL_MIB = 81559;
/** What an idle H100 shows as used (driver and context reservations). */
export const GPU_IDLE_MIB = 4;

export interface GpuHolding {
  pid: number;
  /** Physical GPU indices (after CUDA_VISIBLE_DEVICES). */
  gpus: number[];
  usedMiB: number;
}

/** Number of GPUs on the simulated host (AERIE_SIM_GPUS, default 8). */
export function gpuCount(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.AERIE_SIM_GPUS ?? 8);
  return Number.isInteger(n) && n >= 1 && n <= 64 ? n : 8;
}

/** A stable uuid per GPU index, shaped like the driver's (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx). */
export function gpuUuid(index: number): string {
  const h = createHash('sha256').update(`aerie-sim-gpu-${index}`).digest('hex');
  return `GPU-${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * The physical GPUs a process with `count` ranks uses: the first `count` of
 * CUDA_VISIBLE_DEVICES when it lists indices, else 0..count-1.
 */
export function gpusFor(count: number, env: NodeJS.ProcessEnv = process.env): number[] {
  const visible = env.CUDA_VISIBLE_DEVICES;
  const listed =
    visible === undefined
      ? null
      : visible
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
  const base =
    listed && listed.every((s) => /^\d+$/.test(s))
      ? listed.map(Number)
      : Array.from({ length: gpuCount(env) }, (_, i) => i);
  return base.slice(0, Math.max(1, count));
}

let releaseOnExit: string | null = null;

/**
 * Record (or update) that this process holds usedMiB on each of gpus, until it exits; a
 * clean exit removes the record, a killed process's record is ignored once its pid is gone.
 */
export function holdGpus(gpus: number[], usedMiB: number, env: NodeJS.ProcessEnv = process.env): void {
  const dir = env.AERIE_SIM_GPU_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${process.pid}.json`);
  const tmp = `${file}.tmp`;
  const holding: GpuHolding = { pid: process.pid, gpus, usedMiB: Math.round(usedMiB) };
  writeFileSync(tmp, JSON.stringify(holding));
  renameSync(tmp, file);
  if (releaseOnExit === null) process.once('exit', () => rmSync(releaseOnExit!, { force: true }));
  releaseOnExit = file;
}

/** A zombie holds no GPU memory (its CUDA context died with it), so only running states count. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Holdings of live processes only. */
export function readHoldings(dir: string | undefined): GpuHolding[] {
  if (!dir) return [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: GpuHolding[] = [];
  for (const name of names) {
    if (!/^\d+\.json$/.test(name)) continue;
    try {
      const h = JSON.parse(readFileSync(join(dir, name), 'utf8')) as GpuHolding;
      if (Number.isInteger(h.pid) && Array.isArray(h.gpus) && alive(h.pid)) out.push(h);
    } catch {
      // a file being replaced: the next query sees it
    }
  }
  return out.sort((a, b) => a.pid - b.pid);
}
