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
import { TrainLaunchError } from './train.js';

export interface SpecforgeRun {
  launcher: string[];
  configPath: string;
  runId: string;
  outputDir: string;
  targetModelPath: string;
  draftModelConfig: string;
  targetBackend: 'sglang' | 'hf' | 'custom';
  /** Online: the conversations. */
  trainDataPath: string;
  /** Offline: SpecForge's hidden-state layout (rows_<k>/data_{i}.ckpt); replaces trainDataPath as the data source. */
  hiddenStatesPath?: string;
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

/** Keys aerie sets: an override of one would silently change where data or checkpoints are. */
const MANAGED = [
  'run_id',
  'output_dir',
  'model.target_model_path',
  'model.draft_model_config',
  'data.train_data_path',
  'data.prompts_path',
  'data.hidden_states_path',
  'training.resume_from',
];

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
  for (const key of Object.keys(r.overrides)) {
    if (MANAGED.includes(key)) {
      throw new TrainLaunchError(`stages.train.overrides: "${key}" is set by aerie from the run (paths, run id, resume); remove it from overrides`);
    }
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
    model: { target_model_path: r.targetModelPath, draft_model_config: r.draftModelConfig, target_backend: r.targetBackend },
    data: {
      ...(r.hiddenStatesPath ? { hidden_states_path: r.hiddenStatesPath } : { train_data_path: r.trainDataPath }),
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

/** `specforge train -c <config>`, plus the resume override on a relaunch. */
export function renderSpecforgeTrainArgv(r: SpecforgeRun, resumeFrom?: string): string[] {
  if (r.launcher.length === 0) throw new TrainLaunchError('train launch: launcher is empty');
  const argv = [...r.launcher, 'train', '-c', r.configPath];
  if (resumeFrom) argv.push(`training.resume_from=${resumeFrom}`);
  return argv;
}

export function renderSpecforgeExportArgv(r: SpecforgeRun, checkpointDir: string, drafterDir: string): string[] {
  return [...r.launcher, 'export', '--to', 'sglang', '--checkpoint', checkpointDir, '--draft-config', r.draftModelConfig, '--output-dir', drafterDir];
}

export interface SpecforgeCheckpoint {
  dir: string;
  step: number;
}

/** `<run_id>-step<N>` directories among entry names, newest first (symlinks and temp dirs are not checkpoints). */
export function specforgeCheckpoints(outputDir: string, runId: string, entries: string[]): SpecforgeCheckpoint[] {
  const prefix = `${runId}-step`;
  return entries
    .filter((e) => e.startsWith(prefix) && /^\d+$/.test(e.slice(prefix.length)))
    .map((e) => ({ dir: `${outputDir}/${e}`, step: Number(e.slice(prefix.length)) }))
    .sort((a, b) => b.step - a.step);
}

