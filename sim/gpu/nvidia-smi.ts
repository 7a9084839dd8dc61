/**
 * `aerie-sim nvidia-smi --query-gpu=... | --query-compute-apps=... --format=csv[,noheader][,nounits]`:
 * the query mode of nvidia-smi, over the simulated GPUs and the processes registered in
 * AERIE_SIM_GPU_DIR. Only the query mode is modelled (the one tools parse).
 */
import { readFileSync } from 'node:fs';
import { GPU_IDLE_MIB, GPU_NAME, GPU_TOTAL_MIB, gpuCount, gpuUuid, readHoldings, type GpuHolding } from './registry.js';

interface Row {
  [field: string]: { value: string; unit?: string };
}

const GPU_FIELDS = new Set(['index', 'uuid', 'name', 'memory.used', 'memory.total', 'memory.free']);
const APP_FIELDS = new Set(['pid', 'gpu_uuid', 'used_memory', 'used_gpu_memory', 'process_name', 'gpu_name']);

function processName(pid: number): string {
  try {
    const argv0 = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '';
    return argv0 || '[Not Found]';
  } catch {
    return '[Not Found]';
  }
}

function gpuRows(holdings: GpuHolding[]): Row[] {
  return Array.from({ length: gpuCount() }, (_, index) => {
    const used = GPU_IDLE_MIB + holdings.filter((h) => h.gpus.includes(index)).reduce((s, h) => s + h.usedMiB, 0);
    return {
      index: { value: String(index) },
      uuid: { value: gpuUuid(index) },
      name: { value: GPU_NAME },
      'memory.used': { value: String(Math.min(used, GPU_TOTAL_MIB)), unit: 'MiB' },
      'memory.total': { value: String(GPU_TOTAL_MIB), unit: 'MiB' },
      'memory.free': { value: String(Math.max(0, GPU_TOTAL_MIB - used)), unit: 'MiB' },
    };
  });
}

/** One row per (process, GPU), in GPU order, like the driver. */
function appRows(holdings: GpuHolding[]): Row[] {
  const rows: { gpu: number; row: Row }[] = [];
  for (const h of holdings) {
    for (const gpu of h.gpus) {
      if (gpu >= gpuCount()) continue;
      rows.push({
        gpu,
        row: {
          pid: { value: String(h.pid) },
          gpu_uuid: { value: gpuUuid(gpu) },
          gpu_name: { value: GPU_NAME },
          used_memory: { value: String(h.usedMiB), unit: 'MiB' },
          used_gpu_memory: { value: String(h.usedMiB), unit: 'MiB' },
          process_name: { value: processName(h.pid) },
        },
      });
    }
  }
  return rows.sort((a, b) => a.gpu - b.gpu).map((r) => r.row);
}

function render(fields: string[], rows: Row[], header: boolean, units: boolean): string {
  const lines: string[] = [];
  if (header) lines.push(fields.map((f) => (units && /memory/.test(f) ? `${f} [MiB]` : f)).join(', '));
  for (const row of rows)
    lines.push(fields.map((f) => (units && row[f].unit ? `${row[f].value} ${row[f].unit}` : row[f].value)).join(', '));
  return lines.length ? lines.join('\n') + '\n' : '';
}

export function runNvidiaSmi(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): { code: number; stdout: string; stderr: string } {
  const opt = (name: string) => args.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
  const gpuQuery = opt('--query-gpu');
  const appQuery = opt('--query-compute-apps');
  const format = opt('--format');
  if ((gpuQuery === undefined) === (appQuery === undefined) || format === undefined) {
    return {
      code: 2,
      stdout: '',
      stderr:
        'aerie-sim nvidia-smi models the query mode only: --query-gpu=F,... or --query-compute-apps=F,... with --format=csv[,noheader][,nounits]\n',
    };
  }
  const fmt = format.split(',');
  if (fmt[0] !== 'csv') return { code: 2, stdout: '', stderr: `"${format}" is not a valid format.\n` };
  const fields = (gpuQuery ?? appQuery)!.split(',').map((f) => f.trim());
  const known = gpuQuery !== undefined ? GPU_FIELDS : APP_FIELDS;
  const bad = fields.find((f) => !known.has(f));
  if (bad !== undefined) return { code: 2, stdout: '', stderr: `Field "${bad}" is not a valid field to query.\n` };
  const holdings = readHoldings(env.AERIE_SIM_GPU_DIR);
  const rows = gpuQuery !== undefined ? gpuRows(holdings) : appRows(holdings);
  return { code: 0, stdout: render(fields, rows, !fmt.includes('noheader'), !fmt.includes('nounits')), stderr: '' };
}
