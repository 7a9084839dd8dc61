/**
 * The SpecForge v0.2 train stage driver: the argv aerie launches for scripts/train_eagle3.py.
 *
 * How v0.2 resumes depends on the revision (src/stages/common/specforge-revision.ts):
 * - Before 961ca7c3 `--resume` is broken: get_last_checkpoint matches `^epoch_(\d+)$`
 *   (SpecForge@73e6f808:specforge/utils.py:66) while checkpoints are saved as
 *   `epoch_{e}_step_{s}` (SpecForge@73e6f808:scripts/train_eagle3.py:466), so it finds nothing,
 *   and the miss replaces --ckpt-dir's weights with fresh ones (…/train_eagle3.py:336-363).
 *   `--ckpt-dir DIR` is broken too until 07959b44 (see resumeLink). So aerie continues the
 *   run itself: a fresh `resume_step_{N}` output dir whose `epoch_0` links to the newest
 *   complete checkpoint, --resume to load it, --max-num-steps = steps still owed.
 * - From 961ca7c3 `--resume` takes the newest `epoch_{e}_step_{s}` of --output-dir by
 *   (epoch, step) (SpecForge@20e2e3f0:specforge/utils.py:232-256); from 6d01edb5 (a day later)
 *   it also loads training_state.pt, restoring optimizer, scheduler, epoch and step, and skips
 *   the batches already done (SpecForge@20e2e3f0:scripts/train_eagle3.py:538-551,1117-1133,
 *   1168-1171). At 961ca7c3 itself a --resume into a directory without checkpoints dies
 *   unpacking `return None, None, None` (SpecForge@961ca7c3:specforge/utils.py:104), so aerie passes
 *   --resume only once a checkpoint exists. It relaunches into the same --output-dir, so
 *   --max-num-steps stays the run's own, absolute cap (the step counter is restored).
 * See v02-checkpoints.ts for that bookkeeping.
 */
import type { SpecforgeProfile } from '../common/index.js';
import { profileOf, TrainLaunchError, type TrainLaunch } from './launch.js';

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

function checkExtraArgs(extra: string[], profile: SpecforgeProfile): void {
  for (const arg of extra) {
    const flag = managedFlagOf(arg);
    if (!flag) continue;
    if (flag === '--resume') {
      // Where it works it only repeats what aerie passes on a relaunch (store_true: twice is once).
      if (profile.v02ResumeWorks) continue;
      throw new TrainLaunchError(
        `stages.train.extra-args: remove --resume. On ${profile.label} --resume looks for epoch_N directories while saving ` +
          'epoch_{e}_step_{s}, so it silently starts over (and drops --ckpt-dir weights); aerie continues runs itself from the newest complete checkpoint.',
      );
    }
    throw new TrainLaunchError(
      `stages.train.extra-args: "${arg}" sets ${flag}, which aerie sets from the train stage config; set it there instead.`,
    );
  }
}

function int(name: string, v: number, min: number): string {
  if (!Number.isInteger(v) || v < min)
    throw new TrainLaunchError(`train launch: ${name} must be an integer ≥ ${min}, got ${v}`);
  return String(v);
}

function positive(name: string, v: number): string {
  if (!Number.isFinite(v) || v <= 0)
    throw new TrainLaunchError(`train launch: ${name} must be a positive number, got ${v}`);
  return String(v); // JS and Python float() agree on these spellings (0.0001, 1e-7)
}

export function renderTrainArgv(l: TrainLaunch): string[] {
  if (l.launcher.length === 0) throw new TrainLaunchError('train launch: launcher is empty');
  const profile = profileOf(l);
  if (profile.flavor !== 'v0.2-scripts') {
    throw new TrainLaunchError(
      `stages.train.driver: specforge-v0.2 runs scripts/train_eagle3.py, which ${profile.label} no longer has (removed upstream in d5883d5b); set stages.train.driver: specforge.`,
    );
  }
  if (l.resumeLink && (l.resumeFrom || l.resume))
    throw new TrainLaunchError('train launch: resumeLink excludes resumeFrom and resume');
  if (l.resume && !profile.v02ResumeWorks) {
    throw new TrainLaunchError(
      `train launch: --resume does not resume on ${profile.label}; continue with resumeFrom (--ckpt-dir) instead`,
    );
  }
  checkExtraArgs(l.extraArgs, profile);
  const argv = [
    ...l.launcher,
    '--target-model-path',
    l.targetModelPath,
    '--draft-model-config',
    l.draftModelConfig,
    '--train-data-path',
    l.trainDataPath,
  ];
  if (l.hiddenStatesPath) argv.push('--train-hidden-states-path', l.hiddenStatesPath);
  argv.push(
    '--chat-template',
    l.chatTemplate,
    '--max-length',
    int('maxLength', l.maxLength, 1),
    '--num-epochs',
    int('numEpochs', l.numEpochs, 1),
    '--batch-size',
    int('batchSize', l.batchSize, 1),
    '--learning-rate',
    positive('learningRate', l.learningRate),
    '--ttt-length',
    int('tttLength', l.tttLength, 1),
    '--tp-size',
    int('tpSize', l.tpSize, 1),
    '--save-interval',
    int('saveInterval', l.saveInterval, 1),
  );
  if (l.resumeFrom) argv.push('--ckpt-dir', l.resumeFrom);
  if ((l.resume || l.resumeLink) && !l.extraArgs.some((a) => managedFlagOf(a) === '--resume')) argv.push('--resume');
  if (l.maxNumSteps !== undefined) argv.push('--max-num-steps', int('maxNumSteps', l.maxNumSteps, 1));
  argv.push('--output-dir', l.outputDir, ...l.extraArgs);
  return argv;
}
