// What a run cost in GPU-hours, per stage and in all, from aerie's own launch records on the
// host (src/hosts/protocol/records.ts: one JSON record per launch with its argv and startedAt,
// and an exit file the launch wrapper writes when the process ends): wall time × GPUs held.
//
//   wall time   startedAt → the exit file's mtime (the process ended: stopped, crashed or done);
//               → now for a launch still running (a report written while the deploy server is up)
//   GPUs held   the host's GPU set (hosts.<host>.gpus: every launch sees exactly those as
//               CUDA_VISIBLE_DEVICES, so the run holds them all) when the config names one; else
//               what the launch's own command line asks for: SGLang's --tp-size × --dp-size,
//               torchrun's --nproc_per_node; else 1, and the report says it assumed so.
// The stage is the launch id's role (<run>.<role>.<n>): server-generate → generate,
// server-extract and extract → extract, train and train-export → train, server-deploy → deploy,
// server-baseline → benchmark.

import type { ProcRecord } from '../hosts/host.js';

export interface LaunchCost {
  launchId: string;
  stage: string;
  startedAt: string;
  /** null while the launch is still running (then counted up to `now`). */
  endedAt: string | null;
  wallSeconds: number;
  gpus: number;
  /** Where `gpus` came from. */
  gpusFrom: 'host gpu set' | 'argv' | 'assumed';
  gpuHours: number;
}

export interface StageCost {
  stage: string;
  launches: number;
  wallSeconds: number;
  gpuHours: number;
}

export interface RunCost {
  stages: StageCost[];
  totalGpuHours: number;
  launches: LaunchCost[];
  /** How the figures were taken, one sentence, for the report. */
  basis: string;
}

const STAGE_ORDER = ['generate', 'extract', 'train', 'deploy', 'benchmark'];

export function stageOfLaunch(launchId: string, runId: string): string | undefined {
  if (!launchId.startsWith(`${runId}.`)) return undefined;
  const role = launchId.slice(runId.length + 1).replace(/\.\d+$/, '');
  if (role === 'server-generate') return 'generate';
  if (role === 'server-extract' || role === 'extract' || role.startsWith('extract')) return 'extract';
  if (role === 'train' || role.startsWith('train')) return 'train';
  if (role === 'server-deploy') return 'deploy';
  if (role === 'server-baseline') return 'benchmark';
  return role;
}

function flagValue(argv: readonly string[], names: readonly string[]): number | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    for (const n of names) {
      const v = a === n ? argv[i + 1] : a.startsWith(`${n}=`) ? a.slice(n.length + 1) : undefined;
      if (v !== undefined && /^\d+$/.test(v)) return Number(v);
    }
  }
  return undefined;
}

/** GPUs one launch holds: see the header. */
export function launchGpus(
  argv: readonly string[],
  hostGpus: readonly number[] | undefined,
): Pick<LaunchCost, 'gpus' | 'gpusFrom'> {
  if (hostGpus && hostGpus.length > 0) return { gpus: hostGpus.length, gpusFrom: 'host gpu set' };
  const nproc = flagValue(argv, ['--nproc_per_node', '--nproc-per-node']);
  if (nproc !== undefined) return { gpus: nproc, gpusFrom: 'argv' };
  const tp = flagValue(argv, ['--tp-size', '--tp', '--tensor-parallel-size']);
  const dp = flagValue(argv, ['--dp-size', '--dp', '--data-parallel-size']);
  if (tp !== undefined || dp !== undefined) return { gpus: (tp ?? 1) * (dp ?? 1), gpusFrom: 'argv' };
  return { gpus: 1, gpusFrom: 'assumed' };
}

export interface LaunchTimes {
  record: ProcRecord;
  /** The exit file's mtime, or undefined while the launch runs. */
  endedAtMs?: number;
}

/** The run's cost from its launches; `now` closes a launch still running. */
export function runCost(
  runId: string,
  launches: readonly LaunchTimes[],
  hostGpus: readonly number[] | undefined,
  now = Date.now(),
): RunCost {
  const costs: LaunchCost[] = [];
  for (const { record, endedAtMs } of launches) {
    const stage = stageOfLaunch(record.launchId, runId);
    if (!stage) continue;
    const start = Date.parse(record.startedAt);
    if (!Number.isFinite(start)) continue;
    const end = endedAtMs ?? now;
    const wallSeconds = Math.max(0, (end - start) / 1000);
    const g = launchGpus(record.argv, hostGpus);
    costs.push({
      launchId: record.launchId,
      stage,
      startedAt: record.startedAt,
      endedAt: endedAtMs === undefined ? null : new Date(endedAtMs).toISOString(),
      wallSeconds,
      ...g,
      gpuHours: (wallSeconds * g.gpus) / 3600,
    });
  }
  costs.sort((a, b) => a.startedAt.localeCompare(b.startedAt));
  const by = new Map<string, StageCost>();
  for (const c of costs) {
    const s = by.get(c.stage) ?? { stage: c.stage, launches: 0, wallSeconds: 0, gpuHours: 0 };
    s.launches++;
    s.wallSeconds += c.wallSeconds;
    s.gpuHours += c.gpuHours;
    by.set(c.stage, s);
  }
  const rank = (s: string): number => (STAGE_ORDER.includes(s) ? STAGE_ORDER.indexOf(s) : STAGE_ORDER.length);
  const stages = [...by.values()].sort((a, b) => rank(a.stage) - rank(b.stage) || a.stage.localeCompare(b.stage));
  const assumed = costs.filter((c) => c.gpusFrom === 'assumed').map((c) => c.launchId);
  const basis =
    `GPU-hours = wall time (launch → exit, from aerie's launch records) × GPUs held ` +
    (hostGpus && hostGpus.length > 0
      ? `(the host's GPU set, ${hostGpus.length} GPU${hostGpus.length === 1 ? '' : 's'}, visible to every launch)`
      : `(each launch's --tp-size × --dp-size or --nproc_per_node)`) +
    (assumed.length > 0 ? `; 1 GPU assumed for ${assumed.join(', ')} (its command line names none)` : '') +
    '.';
  return { stages, totalGpuHours: stages.reduce((a, s) => a + s.gpuHours, 0), launches: costs, basis };
}

/** "0.012 GPU-h" with enough digits to be non-zero for a simulator run. */
export function formatGpuHours(h: number): string {
  if (h === 0) return '0 GPU-h';
  const digits = h >= 10 ? 1 : h >= 1 ? 2 : Math.min(6, Math.max(3, 1 - Math.floor(Math.log10(h)) + 1));
  return `${h.toFixed(digits)} GPU-h`;
}

export function costLines(c: RunCost): string[] {
  const parts = c.stages.map((s) => `${s.stage} ${formatGpuHours(s.gpuHours)}`);
  return [
    `GPU-hours: ${formatGpuHours(c.totalGpuHours)} in all (${parts.join(', ') || 'no launches recorded'}).`,
    c.basis,
  ];
}
