/**
 * The current SpecForge CLI's checkpoint layout, as its CheckpointManager writes and reads it
 * (SpecForge@a6b6b023:specforge/training/checkpoint.py). training_state.pt and the rank files
 * hold JSON here, not pickles: aerie only lists them, and only this simulator reads them back.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';

export const STATE_FILE = 'training_state.pt'; // checkpoint.py:32
export const rankFile = (r: number): string => `training_state_rank${r}.pt`; // checkpoint.py:62-63

export interface SharedState {
  global_step: number;
  epoch: number;
  epoch_batch: number;
  epoch_samples: number;
  strategy: string;
  run_id: string;
  world_size: number;
  /** The resume contract, compared key by key on resume (trainer.py:247-341). */
  contract: Record<string, unknown>;
  draft_config: Record<string, unknown>;
  aerie_sim: {
    trained_steps: number;
    trained_sample_epochs: number;
    accept_length: number;
    samples_per_epoch: number;
    steps_per_epoch: number;
  };
}

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const exists = async (p: string): Promise<boolean> => (await fs.stat(p).catch(() => null)) !== null;
const isFile = async (p: string): Promise<boolean> => (await fs.stat(p).catch(() => null))?.isFile() ?? false;

/** `<run_id>-step<N>` dirs, complete or not (checkpoint.py:457-466). */
export async function stepDirs(out: string, runId: string): Promise<{ step: number; dir: string }[]> {
  const re = new RegExp(`^${escapeRe(runId)}-step(\\d+)$`);
  const names = await fs.readdir(out).catch(() => [] as string[]);
  const found: { step: number; dir: string }[] = [];
  for (const n of names) {
    const m = re.exec(n);
    if (m && (await fs.stat(path.join(out, n)).catch(() => null))?.isDirectory())
      found.push({ step: Number(m[1]), dir: path.join(out, n) });
  }
  return found;
}

// torch.save to `<path>.tmp`, then os.replace (checkpoint.py:416-419).
async function atomicSave(file: string, obj: unknown): Promise<void> {
  await fs.writeFile(`${file}.tmp`, JSON.stringify(obj, null, 1) + '\n');
  await fs.rename(`${file}.tmp`, file);
}

/**
 * Points inside one save where a kill can land, each a state HEAD's concurrent writers can
 * leave (checkpoint.py:93-99: each rank writes its own file, then rank 0 the shared state; no
 * barrier orders rank 0's shared file against its peers' files; the all_gather at :102 and the
 * -latest repoint at :104 come only after all of them):
 * - `rank0-opened`: rank 0's `training_state_rank0.pt.tmp` exists, empty (torch.save opened it).
 * - `shared-written`: rank 0's two files are in place, no peer's yet.
 * - `peers-written`: every rank file is in place, the shared state's temp name is open and empty
 *   (what the real two-rank SIGKILL left).
 * - `files-written`: every file is in place; -latest still names the previous save.
 */
export type SavePoint = 'rank0-opened' | 'shared-written' | 'peers-written' | 'files-written';
export const SAVE_POINTS: readonly SavePoint[] = ['rank0-opened', 'shared-written', 'peers-written', 'files-written'];

export interface SaveHooks {
  /** Python's last-resort logging handler: WARNING and above, bare message, stderr. */
  warn(message: string): void;
  /** Called at each SavePoint this save passes, so a fault can end the process there. */
  between?(what: SavePoint): void;
  /** Peers' rank files before rank 0's shared state (the order `peers-written` needs); default after. */
  peersFirst?: boolean;
}

/**
 * One save of step `st.global_step` by every rank (checkpoint.py:70-107). In HEAD the ranks
 * write concurrently; this writes one legal interleaving: rank 0's file, then the shared state
 * and ranks 1… in the order `peersFirst` asks for.
 */
export async function saveCheckpoint(
  out: string,
  st: SharedState,
  maxCheckpoints: number,
  hooks: SaveHooks,
): Promise<string> {
  const step = st.global_step;
  await fs.mkdir(out, { recursive: true });
  // Fork semantics: saving S first deletes every step dir ≥ S (checkpoint.py:109-120).
  const stale = (await stepDirs(out, st.run_id))
    .filter((s) => s.step >= step)
    .map((s) => s.dir)
    .sort();
  if (stale.length) {
    hooks.warn(`rewinding checkpoint timeline at step ${step}: deleting ${stale.join(', ')}`);
    for (const d of stale) await fs.rm(d, { recursive: true, force: true });
  }
  const dir = path.join(out, `${st.run_id}-step${step}`);
  await fs.mkdir(dir, { recursive: true }); // final name, no temp dir (checkpoint.py:92)
  const rankState = (r: number) => ({ optimizer: null, rng: { rank: r, step } });
  // torch.save opens the temp name before it writes a byte: a kill then leaves it empty, as the
  // real SIGKILL mid-save did (test/fixtures/real/specforge-a6b6b023/ls-after-kill.txt).
  await fs.writeFile(`${path.join(dir, rankFile(0))}.tmp`, '');
  hooks.between?.('rank0-opened');
  await atomicSave(path.join(dir, rankFile(0)), rankState(0));
  const peers = async (): Promise<void> => {
    for (let r = 1; r < st.world_size; r++) await atomicSave(path.join(dir, rankFile(r)), rankState(r));
  };
  if (hooks.peersFirst) {
    await peers();
    // Rank 0's torch.save of the shared state has opened its temp name (a 20 MB save was still
    // empty when the real kill landed: test/fixtures/real/specforge-a6b6b023-cpu-ws2/ls-after-kill.txt).
    await fs.writeFile(`${path.join(dir, STATE_FILE)}.tmp`, '');
    hooks.between?.('peers-written');
    await atomicSave(path.join(dir, STATE_FILE), st);
  } else {
    await atomicSave(path.join(dir, STATE_FILE), st);
    hooks.between?.('shared-written');
    await peers();
  }
  hooks.between?.('files-written');
  // After every rank reported success (checkpoint.py:102-105): relative link, then rotate.
  const link = path.join(out, `${st.run_id}-latest`);
  await fs.rm(link, { recursive: true, force: true });
  await fs.symlink(path.basename(dir), link); // checkpoint.py:440
  if (maxCheckpoints > 0) {
    // Only dirs holding training_state.pt count; never the one just saved (checkpoint.py:444-455,468-472).
    const complete: { step: number; dir: string }[] = [];
    for (const s of await stepDirs(out, st.run_id)) if (await isFile(path.join(s.dir, STATE_FILE))) complete.push(s);
    complete.sort((a, b) => a.step - b.step || (a.dir < b.dir ? -1 : 1));
    for (const old of complete.slice(0, -maxCheckpoints))
      if (old.step !== step) await fs.rm(old.dir, { recursive: true, force: true });
  }
  return dir;
}

/** CheckpointManager.resolve_resume_dir (checkpoint.py:322-375). */
export async function resolveResumeDir(p: string): Promise<string> {
  let dir = p.startsWith('file://') ? p.slice('file://'.length) : p;
  dir = path.resolve(dir.replace(/^~(?=\/|$)/, process.env.HOME ?? '~'));
  if (path.basename(dir) === STATE_FILE) {
    if (!(await isFile(dir))) throw new Error(`FileNotFoundError: checkpoint state file does not exist: ${dir}`);
    dir = path.dirname(dir);
  }
  if (await isFile(path.join(dir, STATE_FILE))) return dir;
  if (!(await fs.stat(dir).catch(() => null))?.isDirectory())
    throw new Error(`FileNotFoundError: checkpoint path does not exist: ${dir}`);
  const names = (await fs.readdir(dir)).sort();
  const latest = new Set<string>();
  for (const n of names.filter((x) => x.endsWith('-latest'))) {
    const real = await fs.realpath(path.join(dir, n)).catch(() => null);
    if (real && (await isFile(path.join(real, STATE_FILE)))) latest.add(real);
  }
  if (latest.size === 1) return [...latest][0]!;
  if (latest.size > 1)
    throw new Error(
      `ValueError: resume root ${dir} contains multiple complete *-latest runs: ${JSON.stringify([...latest].sort())}; select one checkpoint explicitly`,
    );
  const byRun = new Map<string, { step: number; dir: string }[]>();
  for (const n of names) {
    const m = /^(.+)-step(\d+)$/.exec(n);
    if (m && (await isFile(path.join(dir, n, STATE_FILE))))
      byRun.set(m[1]!, [...(byRun.get(m[1]!) ?? []), { step: Number(m[2]), dir: path.join(dir, n) }]);
  }
  if (byRun.size === 0) throw new Error(`FileNotFoundError: no complete checkpoint found under ${dir}`);
  if (byRun.size > 1)
    throw new Error(
      `ValueError: resume root ${dir} contains multiple checkpoint runs: ${JSON.stringify([...byRun.keys()].sort())}; select one checkpoint explicitly`,
    );
  return [...byRun.values()][0]!.sort((a, b) => b.step - a.step)[0]!.dir;
}

export async function readShared(dir: string): Promise<SharedState> {
  return JSON.parse(await fs.readFile(path.join(dir, STATE_FILE), 'utf8')) as SharedState;
}

/**
 * read_resume_state on each of `world` ranks (checkpoint.py:224-320): every rank resolves the
 * same directory, then rank r needs its own file and the saved world size equal to this one,
 * else a run past step 0 cannot resume. `refusals` holds each refusing rank's ValueError, in
 * rank order; the ranks raise independently, so several can.
 */
export async function readResumeState(
  resumeFrom: string,
  world: number,
): Promise<{ dir: string; state: SharedState; refusals: Map<number, string> }> {
  const dir = await resolveResumeDir(resumeFrom);
  const state = await readShared(dir);
  const refusals = new Map<number, string>();
  for (let r = 0; r < world; r++) {
    const usable = (await exists(path.join(dir, rankFile(r)))) && state.world_size === world;
    if (!usable && state.global_step > 0) {
      refusals.set(
        r,
        `ValueError: checkpoint ${dir} has no usable per-rank state for rank ${r} at world_size=${world} (written at world_size=${state.world_size}): ` +
          "resuming training needs each rank's optimizer/RNG shard — resume at the original world size, or pass require_full_state=False to restore weights and counters only",
      );
    }
  }
  return { dir, state, refusals };
}

/**
 * export's resolve_training_state (SpecForge@a6b6b023:specforge/export/checkpoint_io.py:93-141):
 * laxer than resume — any file path, the dir's training_state.pt, one `*-latest`, else the
 * highest step dir of any run.
 */
export async function resolveExportState(p: string): Promise<SharedState> {
  const q = p.startsWith('file://') ? p.slice('file://'.length) : p;
  if (await isFile(q)) return JSON.parse(await fs.readFile(q, 'utf8')) as SharedState;
  if (await isFile(path.join(q, STATE_FILE))) return readShared(q);
  const names = (await fs.readdir(q).catch(() => [] as string[])).sort();
  const latest: string[] = [];
  for (const n of names.filter((x) => x.endsWith('-latest'))) {
    const real = await fs.realpath(path.join(q, n)).catch(() => null);
    if (real && (await isFile(path.join(real, STATE_FILE)))) latest.push(n);
  }
  if (latest.length > 1)
    throw new Error(
      `ValueError: '${p}' holds several runs (${JSON.stringify(latest)}); pass the {run_id}-step{N} checkpoint directory explicitly`,
    );
  if (latest.length === 1) return readShared(await fs.realpath(path.join(q, latest[0]!)));
  const steps: [number, string][] = [];
  for (const n of names) {
    const m = /-step(\d+)$/.exec(n);
    if (m && (await isFile(path.join(q, n, STATE_FILE)))) steps.push([Number(m[1]), path.join(q, n)]);
  }
  if (steps.length) return readShared(steps.sort((a, b) => b[0] - a[0] || (a[1] < b[1] ? 1 : -1))[0]![1]);
  throw new Error(
    `FileNotFoundError: '${p}' is not a training_state.pt, a checkpoint directory, or an output_dir with a '{run_id}-latest' pointer / step directories`,
  );
}
