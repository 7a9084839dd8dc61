/**
 * The current SpecForge CLI's checkpoints (HEAD a6b6b023 = PyPI specforge 0.2.0), read from the
 * directory: no log line names one. What HEAD writes, from
 * SpecForge@a6b6b023:specforge/training/checkpoint.py:
 *
 * - `<output_dir>/<run_id>-step<N>/` created under its final name (no temp directory), :92.
 * - every rank writes `training_state_rank<r>.pt` (optimizer shard or None, RNG), then rank 0
 *   writes the shared `training_state.pt` (weights, counters, world_size; under DDP also the
 *   optimizer, controller.py:845-879), :93-99; each file through `<name>.tmp` + os.replace,
 *   :416-419. Nothing orders rank 0's shared file against the other ranks' files, so a crash
 *   can leave `training_state.pt` without a peer's rank file, or every rank file without it
 *   (the real two-rank SIGKILL did: test/fixtures/real/specforge-a6b6b023-cpu-ws2/); resume
 *   needs this rank's file at the saved world size, :298-319.
 * - only after every rank reports success (an all_gather, :102,131-144) does rank 0 repoint
 *   the relative symlink `<run_id>-latest` → `<run_id>-step<N>` (:104,428-442) and rotate.
 * - rotation (max_checkpoints > 0) removes the oldest dirs holding `training_state.pt`, never
 *   the best or the one just saved, :444-455; dirs without it are never rotated.
 * - saving step S first deletes every `<run_id>-step<M>` with M ≥ S, complete or not (:109-120).
 * - `<run_id>-best` and `<run_id>.best_meta.json` follow eval, :165-182.
 */
import type { FileStat, Host } from '../../hosts/host.js';

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
export async function listSpecforgeCheckpoints(
  host: Host,
  outputDir: string,
  runId: string,
): Promise<SpecforgeCheckpointDir> {
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
  if (extra.length)
    return `${c.dir} was written at a larger world size (${extra.join(', ')}); HEAD resumes only at the world size that wrote it`;
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

/** Rank files 0..n-1 present and non-empty (`contiguous`), and one past the highest rank file of any size (`highest`). */
function rankFiles(c: SpecforgeCheckpointListing): { contiguous: number; highest: number } {
  let contiguous = 0;
  while (c.files[rankStateFile(contiguous)]! > 0) contiguous++;
  let highest = 0;
  for (const n of Object.keys(c.files)) {
    const m = /^training_state_rank(\d+)\.pt$/.exec(n);
    if (m) highest = Math.max(highest, Number(m[1]) + 1);
  }
  return { contiguous, highest };
}

export type SpecforgeResumePlan =
  | { kind: 'resume'; checkpoint: SpecforgeCheckpointListing; skipped: string[] }
  | { kind: 'fresh'; skipped: string[] }
  /** The run's checkpoints were written at another world size: SpecForge refuses every one of them. */
  | { kind: 'world-mismatch'; writtenAt: number; worldSize: number; evidence: string };

/**
 * The world size the run's checkpoints were written at, from what the directory proves:
 *
 * - the `-latest` target's rank files: rank 0 repoints it only after every rank reported its
 *   files written (SpecForge@a6b6b023:specforge/training/checkpoint.py:102-104), and every rank
 *   writes one (controller.py:872-879), so its count is the world size. aerie resumes from the
 *   newest complete step ≥ that target, so no later save rewinds and rewrites it.
 * - else an older step directory: only the newest one can be a save cut short, since saving
 *   step S first deletes every step ≥ S (checkpoint.py:109-120).
 * - else a rank file at or past `worldSize` in the newest one: a larger world wrote it.
 *
 * The newest directory alone proves nothing smaller: a save of two ranks cut short after rank
 * 0's files looks like a complete save of one (checkpoint.py:93-99 has no barrier between them).
 */
function writtenWorld(d: SpecforgeCheckpointDir, worldSize: number): { world: number; evidence: string } | undefined {
  const shared = (c: SpecforgeCheckpointListing): boolean => c.files[SHARED_STATE]! > 0;
  const exact = (c: SpecforgeCheckpointListing): number | undefined => {
    const r = rankFiles(c);
    return shared(c) && r.contiguous > 0 && r.contiguous === r.highest ? r.contiguous : undefined;
  };
  const name = (c: SpecforgeCheckpointListing): string => c.dir.slice(c.dir.lastIndexOf('/') + 1);
  const files = (n: number): string => (n === 1 ? rankStateFile(0) : `${rankStateFile(0)} … ${rankStateFile(n - 1)}`);
  const latest = d.latest?.step === undefined ? undefined : d.checkpoints.find((c) => c.step === d.latest!.step);
  const fromLatest = latest && exact(latest);
  if (latest && fromLatest)
    return { world: fromLatest, evidence: `${d.latest!.target} (what -latest points at) holds ${files(fromLatest)}` };
  for (const c of d.checkpoints.slice(1)) {
    const n = exact(c);
    if (n) return { world: n, evidence: `${name(c)} holds ${files(n)}` };
  }
  const newest = d.checkpoints[0];
  if (newest && shared(newest) && rankFiles(newest).highest > worldSize) {
    const n = rankFiles(newest).highest;
    return { world: n, evidence: `${name(newest)} holds ${rankStateFile(n - 1)}` };
  }
  return undefined;
}

/**
 * What a relaunch at `worldSize` should do with the run's output directory: resume the newest
 * checkpoint with every file of that world size, start over when there is none, or refuse
 * when the checkpoints were written at another world size. Starting over then would be worse
 * than failing: the new run's first save deletes every later step (checkpoint.py:109-120), and
 * SpecForge refuses each of them anyway (checkpoint.py:298-319).
 */
export function planSpecforgeResume(d: SpecforgeCheckpointDir, worldSize: number): SpecforgeResumePlan {
  const all = [...d.checkpoints].sort((a, b) => b.step - a.step);
  const sorted: SpecforgeCheckpointDir = { ...d, checkpoints: all };
  const written = writtenWorld(sorted, worldSize);
  if (written && written.world !== worldSize)
    return { kind: 'world-mismatch', writtenAt: written.world, worldSize, evidence: written.evidence };
  const checkpoint = newestCompleteCheckpoint(all, worldSize);
  const skipped = all
    .filter((c) => !checkpoint || c.step > checkpoint.step)
    .map((c) => checkpointProblem(c, worldSize))
    .filter((p): p is string => p !== undefined);
  return checkpoint ? { kind: 'resume', checkpoint, skipped } : { kind: 'fresh', skipped };
}

/** deployment.trainer.nnodes × nproc_per_node of the written config (each defaults to 1). */
export function specforgeWorldSize(trainer?: { nnodes?: number | null; nproc_per_node?: number | null }): number {
  return (trainer?.nnodes ?? 1) * (trainer?.nproc_per_node ?? 1);
}
