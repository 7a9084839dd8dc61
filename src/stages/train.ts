/**
 * The SpecForge v0.2 train stage driver: the argv aerie launches, and (re-exported from the
 * train-* siblings) how it reads progress, finds checkpoints, continues an interrupted run,
 * checks the drafter it produced and classifies a failure.
 *
 * How v0.2 resumes (checked against sgl-project/SpecForge, version.txt 0.2.0 from 2025-12
 * until the script was retired in 2026-07): `--resume` first looked for `epoch_N` directories
 * while saving `epoch_{e}_step_{s}`, so it restarted from scratch (fixed only in March 2026),
 * and with `--ckpt-dir` given a `--resume` miss even discards those weights. `--ckpt-dir DIR`
 * loads DIR's weights and config and then counts epochs and steps from zero. So aerie never
 * passes `--resume`: it picks the newest complete checkpoint itself, passes it as
 * `--ckpt-dir`, bounds the run with `--max-num-steps` to the steps still owed, and gives the
 * continuation its own output directory (`resume_step_{N}`, N = steps already done) because
 * its checkpoint names restart at step 1 and would otherwise overwrite earlier ones.
 * See train-checkpoint.ts for that bookkeeping.
 */
export { parseTrainProgress, type TrainProgress } from './train-progress.js';
export {
  latestCheckpoint,
  planTrainResume,
  rankCheckpoints,
  resumeSegmentDir,
  segmentBases,
  type CheckpointRef,
  type RankedCheckpoint,
  type ResumePlan,
  type SegmentListing,
} from './train-checkpoint.js';
export {
  parseSafetensorsHeader,
  safetensorsHeaderLength,
  SafetensorsTruncatedError,
  verifyDrafter,
} from './train-drafter.js';
export { classifyTrainFailure, type TrainFailure, type TrainFailureKind } from './train-failure.js';

/** A launch that cannot be rendered: a config problem, never worth a retry (map it to ConfigError). */
export class TrainLaunchError extends Error {
  override name = 'TrainLaunchError';
}

export interface TrainLaunch {
  /** argv that starts train_eagle3.py, e.g. torchrun --standalone --nproc_per_node 8 scripts/train_eagle3.py */
  launcher: string[];
  targetModelPath: string;
  draftModelConfig: string;
  trainDataPath: string;
  /** Offline training from extracted hidden states (directory of *.ckpt files). */
  hiddenStatesPath?: string;
  outputDir: string;
  chatTemplate: string;
  maxLength: number;
  numEpochs: number;
  batchSize: number;
  learningRate: number;
  tttLength: number;
  tpSize: number;
  saveInterval: number;
  /** Checkpoint directory to continue from; rendered as --ckpt-dir (weights only in v0.2). */
  resumeFrom?: string;
  /** --max-num-steps: on a continuation, the steps still owed. */
  maxNumSteps?: number;
  extraArgs: string[];
}

/** Flags aerie sets itself; the same flag again in extra-args would silently win (argparse: last one counts). */
const MANAGED_FLAGS = [
  '--target-model-path',
  '--draft-model-config',
  '--train-data-path',
  '--train-hidden-states-path',
  '--chat-template',
  '--max-length',
  '--num-epochs',
  '--batch-size',
  '--learning-rate',
  '--ttt-length',
  '--tp-size',
  '--save-interval',
  '--ckpt-dir',
  '--max-num-steps',
  '--output-dir',
  '--resume',
];

/** Which managed flag an extra argument would set, counting argparse's unique-prefix abbreviations. */
function managedFlagOf(arg: string): string | undefined {
  if (!arg.startsWith('--') || arg.length < 3) return undefined;
  const name = arg.split('=')[0];
  return MANAGED_FLAGS.find((f) => f === name) ?? MANAGED_FLAGS.find((f) => f.startsWith(name));
}

function checkExtraArgs(extra: string[]): void {
  for (const arg of extra) {
    const flag = managedFlagOf(arg);
    if (!flag) continue;
    if (flag === '--resume') {
      throw new TrainLaunchError(
        'stages.train.extra-args: remove --resume. SpecForge v0.2 --resume looks for epoch_N directories while saving ' +
          'epoch_{e}_step_{s}, so it silently starts over (and drops --ckpt-dir weights); aerie continues runs itself from the newest complete checkpoint.',
      );
    }
    throw new TrainLaunchError(`stages.train.extra-args: "${arg}" sets ${flag}, which aerie sets from the train stage config; set it there instead.`);
  }
}

function int(name: string, v: number, min: number): string {
  if (!Number.isInteger(v) || v < min) throw new TrainLaunchError(`train launch: ${name} must be an integer ≥ ${min}, got ${v}`);
  return String(v);
}

function positive(name: string, v: number): string {
  if (!Number.isFinite(v) || v <= 0) throw new TrainLaunchError(`train launch: ${name} must be a positive number, got ${v}`);
  return String(v); // JS and Python float() agree on these spellings (0.0001, 1e-7)
}

export function renderTrainArgv(l: TrainLaunch): string[] {
  if (l.launcher.length === 0) throw new TrainLaunchError('train launch: launcher is empty');
  checkExtraArgs(l.extraArgs);
  const argv = [
    ...l.launcher,
    '--target-model-path', l.targetModelPath,
    '--draft-model-config', l.draftModelConfig,
    '--train-data-path', l.trainDataPath,
  ];
  if (l.hiddenStatesPath) argv.push('--train-hidden-states-path', l.hiddenStatesPath);
  argv.push(
    '--chat-template', l.chatTemplate,
    '--max-length', int('maxLength', l.maxLength, 1),
    '--num-epochs', int('numEpochs', l.numEpochs, 1),
    '--batch-size', int('batchSize', l.batchSize, 1),
    '--learning-rate', positive('learningRate', l.learningRate),
    '--ttt-length', int('tttLength', l.tttLength, 1),
    '--tp-size', int('tpSize', l.tpSize, 1),
    '--save-interval', int('saveInterval', l.saveInterval, 1),
  );
  if (l.resumeFrom) argv.push('--ckpt-dir', l.resumeFrom);
  if (l.maxNumSteps !== undefined) argv.push('--max-num-steps', int('maxNumSteps', l.maxNumSteps, 1));
  argv.push('--output-dir', l.outputDir, ...l.extraArgs);
  return argv;
}
