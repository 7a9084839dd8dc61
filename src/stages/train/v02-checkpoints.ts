/**
 * Finding v0.2 checkpoints and continuing a run from one. Two layouts share one output dir:
 *
 * - A run's own `epoch_{e}_step_{s}` checkpoints (SpecForge@73e6f808:scripts/train_eagle3.py:466),
 *   and, where --resume works, every relaunch's too: --resume restores the step counter, so s
 *   stays the run's global step (SpecForge@20e2e3f0:scripts/train_eagle3.py:1117-1130).
 * - aerie's continuations (--ckpt-dir, which counts steps from zero again,
 *   SpecForge@73e6f808:scripts/train_eagle3.py:702-703) each write into
 *   `<output-dir>/resume_step_{N}`, N = steps done before it, so a checkpoint stands for N + s
 *   steps and none overwrites an earlier one. A run begun on an older revision keeps them.
 *
 * Everything is derived from directory listings: nothing to store, nothing to go stale.
 */
import path from 'node:path';
import { profileOf, type TrainLaunch } from './launch.js';

export interface CheckpointRef {
  dir: string;
  epoch: number;
  step: number;
}

const CHECKPOINT = /^epoch_(\d+)_step_(\d+)$/;
const SEGMENT = /^resume_step_(\d+)$/;

/** SpecForge's name, or null for temp dirs (`.epoch_..tmp-..`), files and anything else. */
function parseCheckpointName(entry: string): { epoch: number; step: number } | null {
  const m = CHECKPOINT.exec(path.posix.basename(entry.replace(/\/+$/, '')));
  return m ? { epoch: Number(m[1]), step: Number(m[2]) } : null;
}

const newer = (a: { epoch: number; step: number }, b: { epoch: number; step: number }): boolean =>
  a.step !== b.step ? a.step > b.step : a.epoch > b.epoch;

/** The newest checkpoint among directory entries (names or paths; `dir` is the entry as given). */
export function latestCheckpoint(entries: string[]): CheckpointRef | null {
  let best: CheckpointRef | null = null;
  for (const e of entries) {
    const p = parseCheckpointName(e);
    if (p && (!best || newer(p, best))) best = { dir: e, ...p };
  }
  return best;
}

export const resumeSegmentDir = (outputDir: string, stepsDone: number): string =>
  path.posix.join(outputDir, `resume_step_${stepsDone}`);

/** Steps-done values of the continuation directories in a listing of the run's output directory. */
export function segmentBases(entries: string[]): number[] {
  return entries
    .map((e) => SEGMENT.exec(path.posix.basename(e)))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

export interface SegmentListing {
  /** Absolute directory the entries were listed from. */
  dir: string;
  /** Steps done before this directory's run started: 0 for the output dir itself. */
  baseStep: number;
  entries: string[];
}

export interface RankedCheckpoint extends CheckpointRef {
  /** Steps done before the launch that wrote it: 0 in the output dir itself, N in resume_step_N. */
  baseStep: number;
  /** Steps of the whole run this checkpoint stands for (baseStep + step). */
  totalStep: number;
}

/** Every checkpoint of the run, newest first, so a caller can skip ones that fail verification. */
export function rankCheckpoints(segments: SegmentListing[]): RankedCheckpoint[] {
  const all: RankedCheckpoint[] = [];
  for (const seg of segments) {
    for (const e of seg.entries) {
      const p = parseCheckpointName(e);
      if (p)
        all.push({
          dir: path.posix.join(seg.dir, path.posix.basename(e)),
          ...p,
          baseStep: seg.baseStep,
          totalStep: seg.baseStep + p.step,
        });
    }
  }
  // Same total in two places (a continuation redone): the later segment holds the newer weights.
  // Within one directory step and epoch grow together, so this agrees with --resume's own
  // (epoch, step) order (SpecForge@20e2e3f0:specforge/utils.py:245-251).
  return all.sort(
    (a, b) => b.totalStep - a.totalStep || b.baseStep - a.baseStep || b.step - a.step || b.epoch - a.epoch,
  );
}

/**
 * A name --resume will not pick, for a damaged checkpoint in the output dir: the script takes the
 * newest name that matches `^epoch_(\d+)(?:_step_(\d+))?$` without checking its files
 * (SpecForge@20e2e3f0:specforge/utils.py:232-239), so a save cut short would be retried forever.
 */
export const quarantineDir = (dir: string, now = Date.now()): string => `${dir.replace(/\/+$/, '')}.incomplete-${now}`;

export type ResumePlan =
  | { kind: 'fresh'; launch: TrainLaunch; note?: string }
  /** aerie's continuation: <from>'s weights (resumeLink or --ckpt-dir), --max-num-steps <owed>, into resume_step_<from.totalStep>. */
  | { kind: 'continue'; launch: TrainLaunch; from: RankedCheckpoint; stepsOwed: number }
  /** The script's own --resume into the same output dir (it finds `from` itself). */
  | { kind: 'resume'; launch: TrainLaunch; from: RankedCheckpoint; stepsOwed: number }
  | { kind: 'done'; finalCheckpoint: RankedCheckpoint; note?: string }
  /** A clean exit that should have covered the plan and did not: nothing a relaunch would fix. */
  | { kind: 'short'; from: RankedCheckpoint | null; stepsOwed: number };

/** Steps the run was planned for: num_epochs × steps_per_epoch, capped by the run's --max-num-steps. */
export function plannedSteps(original: TrainLaunch, stepsPerEpoch: number): number {
  if (!Number.isInteger(stepsPerEpoch) || stepsPerEpoch < 1) {
    throw new Error(
      `planTrainResume: steps per epoch must be a positive integer (read it from the trainer's log), got ${stepsPerEpoch}`,
    );
  }
  return Math.min(original.numEpochs * stepsPerEpoch, original.maxNumSteps ?? Infinity);
}

/** Where --ckpt-dir works (07959b44…) and --resume cannot take this checkpoint, --ckpt-dir; before 961ca7c3, the `epoch_0` link (v02-argv.ts). */
const continuation = (original: TrainLaunch, from: RankedCheckpoint, owed: number): TrainLaunch => ({
  ...original,
  resume: undefined,
  ...(profileOf(original).v02ResumeWorks ? { resumeFrom: from.dir } : { resumeLink: from.dir }),
  maxNumSteps: owed,
  outputDir: resumeSegmentDir(original.outputDir, from.totalStep),
});

/** The name --resume finds in a continuation's output dir before 961ca7c3 (SpecForge@73e6f808:specforge/utils.py:66). */
export const RESUME_LINK = 'epoch_0';

/** The largest divisor of `steps` not above `interval`: a save-interval whose last save is the last step. */
export function dividingInterval(steps: number, interval: number): number {
  for (let d = Math.min(steps, interval); d > 1; d--) if (steps % d === 0) return d;
  return 1;
}

/**
 * What to launch next for a run planned as `original` (its first launch), given the newest
 * usable checkpoint and the trainer's steps per epoch (from its log: parseTrainProgress).
 *
 * After a crash: --resume where it works and the checkpoint is the output dir's own, else
 * aerie's continuation. After a clean exit on a revision without a final save (before
 * 03a3dedb the script saves only when `global_step % save_interval == 0`,
 * SpecForge@73e6f808:scripts/train_eagle3.py:820-822, and stops without saving, …:830-832),
 * the steps after the last save were trained and lost. They are fewer than one interval, and
 * retraining them from a --ckpt-dir continuation would re-warm a learning rate the full run had
 * annealed, so the newest checkpoint is the drafter, with a note naming the steps lost and the
 * save-interval that keeps them. A run shorter than one interval saved nothing: it is run
 * again, exactly as planned, with --save-interval set to its length so its last step saves.
 */
export function planTrainResume(
  original: TrainLaunch,
  from: RankedCheckpoint | null,
  stepsPerEpoch: number | undefined,
  cleanExit = false,
): ResumePlan {
  const profile = profileOf(original);
  if (!cleanExit && !from) return { kind: 'fresh', launch: original };
  if (stepsPerEpoch === undefined) {
    // tqdm prints `0/N` before the first step, so a log without it belongs to a launch that never trained.
    if (cleanExit) return { kind: 'short', from, stepsOwed: NaN };
    // --resume sizes itself; a continuation cannot be sized without the figure: start over.
    if (profile.v02ResumeWorks && from!.baseStep === 0)
      return { kind: 'resume', from: from!, stepsOwed: NaN, launch: { ...original, resume: true } };
    return { kind: 'fresh', launch: original };
  }
  const planned = plannedSteps(original, stepsPerEpoch);
  const done = from?.totalStep ?? 0;
  if (from && done >= planned) return { kind: 'done', finalCheckpoint: from };
  const owed = planned - done;
  if (cleanExit) {
    if (profile.finalSave || owed >= original.saveInterval) return { kind: 'short', from, stepsOwed: owed };
    const why = `${profile.label} saves only every save-interval (${original.saveInterval}) steps and has no final save`;
    if (!from) {
      return {
        kind: 'fresh',
        launch: { ...original, saveInterval: planned },
        note: `${why}: the run's ${planned} steps left no checkpoint, so it runs again as planned with --save-interval ${planned}`,
      };
    }
    const fix = `set stages.train.save-interval to a divisor of ${planned} (e.g. ${dividingInterval(planned, original.saveInterval)}) to keep every step`;
    return {
      kind: 'done',
      finalCheckpoint: from,
      note: `${why}: the last ${owed} of ${planned} steps were trained but not saved, so the drafter is step ${done}'s checkpoint; ${fix}`,
    };
  }
  if (from && profile.v02ResumeWorks && from.baseStep === 0) {
    return { kind: 'resume', from, stepsOwed: owed, launch: { ...original, resume: true } };
  }
  return { kind: 'continue', from: from!, stepsOwed: owed, launch: continuation(original, from!, owed) };
}
