/**
 * The current SpecForge CLI driver: aerie writes the run's config.yaml itself (every field it
 * manages, plus the researcher's overrides), launches `specforge train -c <config.yaml>`, and
 * turns the finished checkpoint into a servable drafter with `specforge export --to sglang`.
 *
 * Checkpoints are `<output_dir>/<run_id>-step<N>/training_state.pt`. This version restores
 * step, epoch, data position and optimizer from `training.resume_from` (at the same world
 * size), so a relaunch passes the newest complete checkpoint aerie found itself — explicitly,
 * not the `-latest` symlink, which filesystems without symlinks do not have.
 */
import { stringify } from 'yaml';
import { refusedOverride } from '../../config/schema.js';
import { TrainLaunchError } from './launch.js';

export interface SpecforgeRun {
  launcher: string[];
  configPath: string;
  runId: string;
  outputDir: string;
  targetModelPath: string;
  draftModelConfig: string;
  /** SpecForge@a6b6b023:specforge/config/schema.py:54: the only backend the CLI accepts. */
  targetBackend: 'sglang';
  /** The conversations the hidden states were made from (for the record: the CLI is driven offline only). */
  trainDataPath: string;
  /** SpecForge's hidden-state layout (rows_<k>/data_{i}.ckpt): the config's one data source. Rendering refuses without it (D1). */
  hiddenStatesPath?: string;
  /**
   * The vocab mapping the prepare step wrote (`<out>/vocab_mapping/vocab_mapping.pt`). Without it
   * every rank rebuilds the mapping by scanning every feature file before step 1; export uses
   * it to refresh the drafter's t2d/d2t (SpecForge@a6b6b023:specforge/export/to_sglang.py:62-79).
   */
  vocabMappingPath?: string;
  chatTemplate: string;
  maxLength: number;
  numEpochs: number;
  maxSteps?: number;
  batchSize: number;
  learningRate: number;
  tttLength: number;
  saveInterval: number;
  maxCheckpoints?: number;
  overrides: Record<string, string | number | boolean>;
}

function setPath(obj: Record<string, unknown>, dotted: string, value: unknown): void {
  const keys = dotted.split('.');
  let node = obj;
  for (const k of keys.slice(0, -1)) {
    if (typeof node[k] !== 'object' || node[k] === null) node[k] = {};
    node = node[k] as Record<string, unknown>;
  }
  node[keys[keys.length - 1]!] = value;
}

/** The config document aerie writes for the run (key order fixed, so the file is golden-testable). */
export function specforgeConfig(r: SpecforgeRun): Record<string, unknown> {
  // Config load refuses these already; a config built in code must not slip past either.
  for (const key of Object.keys(r.overrides)) {
    const why = refusedOverride(key);
    if (why) throw new TrainLaunchError(`stages.train.overrides.${key}: ${why}`);
  }
  if (!r.hiddenStatesPath) {
    // SpecForge@a6b6b023:specforge/config/schema.py:706-710: online needs deployment.mode=disaggregated.
    throw new TrainLaunchError(
      'stages.train.driver: specforge trains offline only (SpecForge refuses colocated online training): set stages.extract.driver: specforge-offline',
    );
  }
  const training: Record<string, unknown> = {
    strategy: 'eagle3',
    num_epochs: r.numEpochs,
    batch_size: r.batchSize,
    learning_rate: r.learningRate,
    ttt_length: r.tttLength,
    save_interval: r.saveInterval,
  };
  if (r.maxSteps !== undefined) training.max_steps = r.maxSteps;
  if (r.maxCheckpoints !== undefined) training.max_checkpoints = r.maxCheckpoints;
  const doc: Record<string, unknown> = {
    run_id: r.runId,
    output_dir: r.outputDir,
    model: {
      target_model_path: r.targetModelPath,
      draft_model_config: r.draftModelConfig,
      target_backend: r.targetBackend,
      // SpecForge@a6b6b023:specforge/config/schema.py:67-68 ("" = none)
      ...(r.vocabMappingPath ? { vocab_mapping_path: r.vocabMappingPath } : {}),
    },
    data: {
      // Exactly one source (SpecForge@a6b6b023:specforge/config/schema.py:152-165).
      hidden_states_path: r.hiddenStatesPath,
      max_length: r.maxLength,
      chat_template: r.chatTemplate,
    },
    training,
  };
  for (const [k, v] of Object.entries(r.overrides)) setPath(doc, k, v);
  return doc;
}

export function renderSpecforgeConfig(r: SpecforgeRun): string {
  return `# written by aerie for this run; edit stages.train in the aerie config instead\n${stringify(specforgeConfig(r))}`;
}

/**
 * `specforge train -c <config>`, plus the resume override on a relaunch: a dotted override of
 * a field the dumped config has (SpecForge@a6b6b023:specforge/config/schema.py:937-963), so
 * the config file on disk stays the one the first launch used.
 */
export function renderSpecforgeTrainArgv(r: SpecforgeRun, resumeFrom?: string): string[] {
  if (r.launcher.length === 0) throw new TrainLaunchError('train launch: launcher is empty');
  const argv = [...r.launcher, 'train', '-c', r.configPath];
  if (resumeFrom) argv.push(`training.resume_from=${resumeFrom}`);
  return argv;
}

/** SpecForge@a6b6b023:specforge/cli.py:199-206: --to, --checkpoint, --draft-config, --output-dir required; --vocab-mapping optional. */
export function renderSpecforgeExportArgv(r: SpecforgeRun, checkpointDir: string, drafterDir: string): string[] {
  const argv = [
    ...r.launcher,
    'export',
    '--to',
    'sglang',
    '--checkpoint',
    checkpointDir,
    '--draft-config',
    r.draftModelConfig,
    '--output-dir',
    drafterDir,
  ];
  if (r.vocabMappingPath) argv.push('--vocab-mapping', r.vocabMappingPath);
  return argv;
}
