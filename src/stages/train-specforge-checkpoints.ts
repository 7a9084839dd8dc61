/**
 * The current SpecForge CLI's checkpoints (HEAD a6b6b023 = PyPI specforge 0.2.0), read from the
 * directory: no log line names one. What HEAD writes, from
 * SpecForge@a6b6b023:specforge/training/checkpoint.py:
 *
 * - `<output_dir>/<run_id>-step<N>/` created under its final name (no temp directory), :92.
 * - every rank writes `training_state_rank<r>.pt` (optimizer shard or None, RNG), then rank 0
 *   writes the shared `training_state.pt` (weights, counters, world_size), :93-99; each file
 *   through `<name>.tmp` + os.replace, :416-419. Nothing orders rank 0's shared file after
 *   the other ranks' files, so a crash can leave `training_state.pt` without a peer's
 *   rank file; resume needs this rank's file at the saved world size, :298-319.
 * - only after every rank reports success (an all_gather, :102,131-144) does rank 0 repoint
 *   the relative symlink `<run_id>-latest` → `<run_id>-step<N>` (:104,428-442) and rotate.
 * - rotation (max_checkpoints > 0) removes the oldest dirs holding `training_state.pt`, never
 *   the best or the one just saved, :444-455; dirs without it are never rotated.
 * - saving step S first deletes every `<run_id>-step<M>` with M ≥ S, complete or not (:109-120).
 * - `<run_id>-best` and `<run_id>.best_meta.json` follow eval, :165-182.
 */
import type { FileStat, Host } from '../hosts/host.js';

export const SHARED_STATE = 'training_state.pt';
export const rankStateFile = (rank: number): string => `training_state_rank${rank}.pt`;

export interface SpecforgeCheckpointListing {
  step: number;
  dir: string;
  /** File name → size in bytes, as listed. */
  files: Record<string, number>;
}

export interface SpecforgeCheckpointLink {
  /** The link's own text (HEAD writes the bare directory name). */
  target: string;
  dir: string;
  step?: number;
}

export interface SpecforgeCheckpointDir {
  checkpoints: SpecforgeCheckpointListing[];
  /** What `<run_id>-latest` points at: the last checkpoint every rank finished. */
  latest?: SpecforgeCheckpointLink;
  best?: SpecforgeCheckpointLink;
}

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

async function readLink(host: Host, path: string): Promise<string | undefined> {
  // Host.stat/list follow links; readlink runs on the host itself, local or over ssh.
  const r = await host.exec(['readlink', '--', path]).catch(() => null);
  if (!r || r.code !== 0) return undefined;
  const t = r.stdout.replace(/\n$/, '');
  return t || undefined;
}

function linkOf(outputDir: string, runId: string, target: string): SpecforgeCheckpointLink {
  const base = target.replace(/\/+$/, '').split('/').pop()!;
  const m = new RegExp(`^${escapeRe(runId)}-step(\\d+)$`).exec(base);
  const dir = target.startsWith('/') ? target : `${outputDir.replace(/\/+$/, '')}/${target}`;
  return m ? { target, dir, step: Number(m[1]) } : { target, dir };
}

/** Every `<run_id>-step<N>` directory with its files, newest step first, and the two links. */
export async function listSpecforgeCheckpoints(host: Host, outputDir: string, runId: string): Promise<SpecforgeCheckpointDir> {
  const entries: FileStat[] = await host.list(outputDir).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT' || /ENOENT|no such file/i.test(String(e.message))) return [];
    throw e;
  });
  const re = new RegExp(`^${escapeRe(runId)}-step(\\d+)$`);
  const out: SpecforgeCheckpointDir = { checkpoints: [] };
  for (const e of entries) {
    const name = e.path.slice(e.path.lastIndexOf('/') + 1);
    const m = re.exec(name);
    if (!m || !e.isDirectory) continue;
    const files: Record<string, number> = {};
    for (const f of await host.list(e.path).catch(() => [] as FileStat[])) {
      if (!f.isDirectory) files[f.path.slice(f.path.lastIndexOf('/') + 1)] = f.size;
    }
    out.checkpoints.push({ step: Number(m[1]), dir: e.path, files });
  }
  out.checkpoints.sort((a, b) => b.step - a.step);
  for (const kind of ['latest', 'best'] as const) {
    const entry = entries.find((e) => e.path.slice(e.path.lastIndexOf('/') + 1) === `${runId}-${kind}`);
    if (!entry) continue;
    const target = await readLink(host, entry.path);
    if (target !== undefined) out[kind] = linkOf(outputDir, runId, target);
  }
  return out;
}

/** Why a checkpoint cannot be resumed at worldSize, or undefined when it can. */
export function checkpointProblem(c: SpecforgeCheckpointListing, worldSize: number): string | undefined {
  const missing: string[] = [];
  for (const name of [SHARED_STATE, ...Array.from({ length: worldSize }, (_, r) => rankStateFile(r))]) {
    if (!(c.files[name]! > 0)) missing.push(name);
  }
  if (missing.length) return `${c.dir} lacks ${missing.join(', ')} (a save cut short)`;
  // A directory holds one save's files (rewind empties it first), so a rank file past
  // worldSize means it was written at a larger world, which HEAD refuses to resume
  // (checkpoint.py:301,312-319).
  const extra = Object.keys(c.files).filter((n) => {
    const m = /^training_state_rank(\d+)\.pt$/.exec(n);
    return m && Number(m[1]) >= worldSize;
  });
  if (extra.length) return `${c.dir} was written at a larger world size (${extra.join(', ')}); HEAD resumes only at the world size that wrote it`;
  return undefined;
}

/**
 * The newest checkpoint HEAD can resume at worldSize: the shared state and every rank's file
 * there and non-empty. `.tmp` files (a torch.save in flight, checkpoint.py:417) never count.
 */
export function newestCompleteCheckpoint(
  listings: SpecforgeCheckpointDir | readonly SpecforgeCheckpointListing[],
  worldSize: number,
): SpecforgeCheckpointListing | undefined {
  const all = Array.isArray(listings) ? listings : (listings as SpecforgeCheckpointDir).checkpoints;
  return [...all].sort((a, b) => b.step - a.step).find((c) => checkpointProblem(c, worldSize) === undefined);
}

/** deployment.trainer.nnodes × nproc_per_node of the written config (each defaults to 1). */
export function specforgeWorldSize(trainer?: { nnodes?: number | null; nproc_per_node?: number | null }): number {
  return (trainer?.nnodes ?? 1) * (trainer?.nproc_per_node ?? 1);
}
