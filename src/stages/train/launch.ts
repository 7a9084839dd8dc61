/**
 * What a SpecForge v0.2 training launch is made of, and the error a launch that cannot be
 * rendered raises. Shared by the argv renderer, the checkpoint bookkeeping and the progress
 * reader, so none of them imports another for its types.
 */
import { SPECFORGE_PROFILES, type SpecforgeProfile } from '../common/index.js';

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
  /** --max-num-steps: on a continuation, the steps still owed; with --resume, the run's own (absolute) cap. */
  maxNumSteps?: number;
  /** Pass --resume: the script finds its own newest checkpoint in outputDir (only where profile.v02ResumeWorks). */
  resume?: boolean;
  /**
   * Load this checkpoint's weights through the broken --resume of revisions before 961ca7c3:
   * its get_last_checkpoint matches only `epoch_N` (SpecForge@73e6f808:specforge/utils.py:64-77),
   * so aerie links `<outputDir>/epoch_0` to the checkpoint and passes --resume. --ckpt-dir cannot
   * be used there: at 73e6f808 it leaves draft_model_config a path string, and
   * build_dataloaders dies on `.vocab_size` (SpecForge@73e6f808:scripts/train_eagle3.py:338,402;
   * seen in test/fixtures/real/specforge-73e6f808/resume.log; fixed in 07959b44).
   * Either way steps count from zero (…:702-703).
   */
  resumeLink?: string;
  /** The host's SpecForge; v0.2.0 when not known. */
  profile?: SpecforgeProfile;
  extraArgs: string[];
}

export const profileOf = (l: Pick<TrainLaunch, 'profile'>): SpecforgeProfile =>
  l.profile ?? SPECFORGE_PROFILES['v0.2.0'];
