/**
 * The launch specs of the extract and train stages, built from the config and the run's paths
 * only (no host access), so the activity that launches and `aerie plan` that shows the launch
 * render the same argv from the same function.
 */
import type { Config } from '../config/schema.js';
import type { ServerLaunchSpec } from '../sglang/launch-argv.js';
import type { HfExtractLaunch, PrepareLaunch } from './extract/index.js';
import type { CommandTemplate, CommandValues, SpecforgeRun, TrainLaunch } from './train/index.js';
import type { SpecforgeProfile } from './common/index.js';

/** Hidden states from the extract stage, and whose layout they are in. */
export interface HiddenStates {
  dir: string;
  /** SpecForge's offline layout: both extract drivers write it (prepare_hidden_states.py, or aerie's converter). */
  layout: 'specforge';
  /** SpecForge's prepare step also wrote the draft vocab mapping (`<out>/vocab_mapping/vocab_mapping.pt`): train and export pass it on. */
  vocabMapping?: string;
}

export interface StagePaths {
  root: string;
  logs: string;
  hidden: string;
  train: string;
}

/** The target server's launch before its role adds speculative or readiness settings. */
export function baseServerSpec(config: Config, role: 'generate' | 'extract' | 'deploy' | 'baseline'): ServerLaunchSpec {
  return {
    launcher: config.server.launcher,
    modelPath: config.target['model-path'],
    port: config.server.port,
    host: config.server['listen-host'],
    tpSize: config.server['tp-size'],
    memFractionStatic: config.server['mem-fraction-static'],
    extraArgs: config.server['extra-args'],
    extraction: role === 'extract',
  };
}

export function prepareSpec(
  config: Config,
  dataPath: string,
  outDir: string,
  profile?: SpecforgeProfile,
): PrepareLaunch {
  const e = config.stages.extract;
  if (e.driver !== 'specforge-offline') throw new Error('prepareSpec: the extract driver is not specforge-offline');
  return {
    launcher: e.launcher,
    targetModelPath: config.target['model-path'],
    draftModelConfig: e['draft-model-config'] ?? config.stages.train['draft-model-config'],
    dataPath,
    outputPath: outDir,
    chatTemplate: e['chat-template'],
    maxLength: e['max-length'],
    tpSize: e['tp-size'],
    batchSize: e['batch-size'],
    fileGroupSize: e['file-group-size'],
    compress: e.compress,
    isPreformatted: e['is-preformatted'],
    memFractionStatic: e['sglang-mem-fraction-static'],
    distTimeout: e['dist-timeout'],
    extraArgs: e['extra-args'],
    ...(profile ? { profile } : {}),
  };
}

/**
 * The transformers driver's job (py/aerie_hs/hf_extract.py). Its `--trust-remote-code` follows the
 * server's, as the server drivers' tokenizer does (stages/extract/tokens.ts).
 */
export function hfExtractSpec(config: Config, dataPath: string, outDir: string): HfExtractLaunch {
  const e = config.stages.extract;
  if (e.driver !== 'transformers') throw new Error('hfExtractSpec: the extract driver is not transformers');
  return {
    python: e.python,
    modelPath: config.target['model-path'],
    dataPath,
    outDir,
    draftModelConfig: e['draft-model-config'] ?? config.stages.train['draft-model-config'],
    chatTemplate: e['chat-template'],
    maxLength: e['max-length'],
    fileGroupSize: e['file-group-size'],
    dtype: e.dtype,
    device: e.device,
    batchSize: e['batch-size'],
    crossCheck: e['cross-check'],
    selfCheckSamples: e['self-check'].samples,
    selfCheckFinal: e['self-check']['final-samples'],
    trustRemoteCode: config.server['extra-args'].includes('--trust-remote-code'),
    servedBy: config.server.engine,
  };
}

export type TrainSpec =
  | { driver: 'specforge-v0.2'; launch: TrainLaunch }
  | { driver: 'specforge'; run: SpecforgeRun; drafterDir: string }
  | { driver: 'command'; template: CommandTemplate; values: CommandValues };

/**
 * SpecForge's trainers read only their own layout, so they get hidden states only from the
 * offline extract driver; a command template gets whichever layout there is, and is told which.
 */
export function trainSpec(
  config: Config,
  paths: StagePaths,
  dataPath: string,
  hidden?: HiddenStates,
  profile?: SpecforgeProfile,
): TrainSpec {
  const t = config.stages.train;
  const outputDir = `${paths.train}/output`;
  const specforgeHidden = hidden?.layout === 'specforge' ? hidden.dir : undefined;
  switch (t.driver) {
    case 'specforge-v0.2':
      return {
        driver: t.driver,
        launch: {
          launcher: t.launcher,
          targetModelPath: config.target['model-path'],
          draftModelConfig: t['draft-model-config'],
          trainDataPath: dataPath,
          hiddenStatesPath: specforgeHidden,
          outputDir,
          chatTemplate: t['chat-template'],
          maxLength: t['max-length'],
          numEpochs: t['num-epochs'],
          batchSize: t['batch-size'],
          learningRate: t['learning-rate'],
          tttLength: t['ttt-length'],
          tpSize: t['tp-size'],
          saveInterval: t['save-interval'],
          extraArgs: t['extra-args'],
          ...(profile ? { profile } : {}),
        },
      };
    case 'specforge':
      return {
        driver: t.driver,
        drafterDir: `${paths.train}/drafter`,
        run: {
          launcher: t.launcher,
          configPath: `${paths.train}/specforge.yaml`,
          runId: t['run-id'],
          outputDir,
          targetModelPath: config.target['model-path'],
          draftModelConfig: t['draft-model-config'],
          targetBackend: t['target-backend'],
          trainDataPath: dataPath,
          hiddenStatesPath: specforgeHidden,
          vocabMappingPath: hidden?.layout === 'specforge' ? hidden.vocabMapping : undefined,
          chatTemplate: t['chat-template'],
          maxLength: t['max-length'],
          numEpochs: t['num-epochs'],
          maxSteps: t['max-steps'],
          batchSize: t['batch-size'],
          learningRate: t['learning-rate'],
          tttLength: t['ttt-length'],
          saveInterval: t['save-interval'],
          maxCheckpoints: t['max-checkpoints'],
          overrides: t.overrides,
        },
      };
    case 'command':
      return {
        driver: t.driver,
        template: {
          launcher: t.launcher,
          resumeArgs: t['resume-args'],
          drafterDir: t['drafter-dir'],
          checkpointPattern: t['checkpoint-pattern'],
        },
        values: {
          target_model: config.target['model-path'],
          draft_model_config: t['draft-model-config'],
          train_data: dataPath,
          hidden_states: hidden?.dir,
          hidden_states_layout: hidden?.layout ?? 'none',
          output_dir: outputDir,
          run_dir: paths.root,
        },
      };
  }
}

/** Which hidden states the train stage receives from an extract result. */
export function hiddenForTrain(config: Config, hidden: HiddenStates | undefined): HiddenStates | undefined {
  if (!hidden) return undefined;
  // A record from before both drivers wrote SpecForge's layout names another one: train online.
  return hidden.layout === 'specforge' ? hidden : undefined;
}

/** The layout the configured extract driver produces. */
export function extractLayout(_config: Config): HiddenStates['layout'] {
  return 'specforge';
}
