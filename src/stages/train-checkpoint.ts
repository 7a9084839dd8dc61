/**
 * Finding v0.2 checkpoints and continuing a run from one.
 *
 * A run's output directory holds `epoch_{e}_step_{s}` checkpoints; each continuation
 * (launched with --ckpt-dir, which counts steps from zero again) writes into
 * `<output-dir>/resume_step_{N}` where N is the steps done before it, so the total steps a
 * checkpoint stands for is N + s and no continuation overwrites an earlier checkpoint.
 * Everything here is derived from directory listings: nothing to store, nothing to go stale.
 */
import path from 'node:path';
import type { TrainLaunch } from './train.js';

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
  /** Steps of the whole run this checkpoint stands for (baseStep + step). */
  totalStep: number;
}

/** Every checkpoint of the run, newest first, so a caller can skip ones that fail verification. */
export function rankCheckpoints(segments: SegmentListing[]): RankedCheckpoint[] {
  const all: RankedCheckpoint[] = [];
  for (const seg of segments) {
    for (const e of seg.entries) {
      const p = parseCheckpointName(e);
      if (p) all.push({ dir: path.posix.join(seg.dir, path.posix.basename(e)), ...p, totalStep: seg.baseStep + p.step });
    }
  }
  // Same total in two places (a continuation redone): the later segment holds the newer weights.
  return all.sort((a, b) => b.totalStep - a.totalStep || b.step - a.step || b.epoch - a.epoch);
}

export type ResumePlan =
  | { kind: 'fresh'; launch: TrainLaunch }
  | { kind: 'continue'; launch: TrainLaunch; from: RankedCheckpoint; stepsOwed: number }
  | { kind: 'done'; finalCheckpoint: RankedCheckpoint };

/**
 * What to launch next for a run planned as `original` (its first launch), given the newest
 * usable checkpoint and the trainer's steps per epoch (from its log: parseTrainProgress).
 */
export function planTrainResume(original: TrainLaunch, from: RankedCheckpoint | null, stepsPerEpoch: number): ResumePlan {
  if (!from) return { kind: 'fresh', launch: original };
  if (!Number.isInteger(stepsPerEpoch) || stepsPerEpoch < 1) {
    throw new Error(`planTrainResume: steps per epoch must be a positive integer (read it from the trainer's log), got ${stepsPerEpoch}`);
  }
  const planned = Math.min(original.numEpochs * stepsPerEpoch, original.maxNumSteps ?? Infinity);
  if (from.totalStep >= planned) return { kind: 'done', finalCheckpoint: from };
  const stepsOwed = planned - from.totalStep;
  return {
    kind: 'continue',
    from,
    stepsOwed,
    launch: {
      ...original,
      resumeFrom: from.dir,
      maxNumSteps: stepsOwed,
      outputDir: resumeSegmentDir(original.outputDir, from.totalStep),
    },
  };
}
