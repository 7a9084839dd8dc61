/**
 * What train_eagle3.py works out before its first step: the draft config, which weights it
 * starts from (--ckpt-dir, or what --resume finds), where its counters start, and how many
 * samples an epoch has. Failures become the Python exception a real run would die with.
 *
 * --ckpt-dir loads weights and config and counts from zero (SpecForge@73e6f808:scripts/train_eagle3.py:336-344,
 * 702-703), but at v0.2.0 the run then dies in build_dataloaders (below). --resume, when --output-dir
 * exists, replaces whatever --ckpt-dir chose with get_last_checkpoint's answer
 * (SpecForge@73e6f808:scripts/train_eagle3.py:347-363): before 961ca7c3 that matches only
 * `^epoch_(\d+)$` (SpecForge@73e6f808:specforge/utils.py:66), never the `epoch_{e}_step_{s}`
 * saved, so the run starts from fresh weights at step 0, silently (the messages go to
 * logger.info). At the end of the range it takes the newest `epoch_{e}(_step_{s})?` by
 * (epoch, step), prints `Last checkpoint detected: …` on every rank, and restores epoch, step and
 * optimizer from its training_state.pt (SpecForge@20e2e3f0:specforge/utils.py:232-256;
 * scripts/train_eagle3.py:519-551,1117-1133).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { ParsedArgs, V02Revision } from './args.js';
import { readSimRecord, readTrainingState, type SimRecord } from './checkpoint.js';
import { countHiddenStateFiles, countJsonlRows, DatasetError } from './data.js';
import { draftDims, type DraftDims } from './safetensors.js';

export type Revision = V02Revision;

export class SetupError extends Error {
  constructor(
    readonly where: 'draft-model' | 'dataset' | 'target-model' | 'vocab-mapping',
    readonly exception: string,
  ) {
    super(exception);
  }
}

/** The training carried in by the weights a run starts from. */
export interface Carried {
  record: Partial<SimRecord> & { trained_steps?: number; samples_per_epoch?: number; steps_per_epoch?: number };
}

export interface Setup {
  draftConfig: Record<string, unknown>;
  dims: DraftDims;
  carried: Carried;
  startEpoch: number;
  startStep: number;
  /** Optimizer and scheduler came from training_state.pt (a working --resume). */
  restored: boolean;
  samples: number;
  logs: string[];
}

const isDir = async (p: string): Promise<boolean> => (await fs.stat(p).catch(() => null))?.isDirectory() ?? false;
const isFile = async (p: string): Promise<boolean> => (await fs.stat(p).catch(() => null))?.isFile() ?? false;

async function readJson(file: string, where: SetupError['where']): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch {
    throw new SetupError(where, `FileNotFoundError: [Errno 2] No such file or directory: '${file}'`);
  }
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    throw new SetupError(where, `json.decoder.JSONDecodeError: ${(e as Error).message} (in ${file})`);
  }
}

/** Without --draft-model-config SpecForge derives one from the target's config.json. */
function draftFromTarget(t: Record<string, unknown>): Record<string, unknown> {
  const vocab = Number(t.vocab_size);
  return {
    architectures: ['LlamaForCausalLMEagle3'],
    model_type: 'llama',
    hidden_size: t.hidden_size,
    intermediate_size: t.intermediate_size,
    num_attention_heads: t.num_attention_heads,
    num_key_value_heads: t.num_key_value_heads ?? t.num_attention_heads,
    num_hidden_layers: 1,
    vocab_size: vocab,
    draft_vocab_size: Math.min(32000, vocab),
    max_position_embeddings: 2048,
    rms_norm_eps: t.rms_norm_eps ?? 1e-5,
  };
}

async function loadWeightsFrom(dir: string): Promise<Carried> {
  const weights = path.join(dir, 'model.safetensors');
  if (!(await isFile(weights))) {
    throw new SetupError(
      'draft-model',
      `OSError: Error no file named model.safetensors, or pytorch_model.bin, found in directory ${dir}.`,
    );
  }
  // A save cut short leaves a header promising more than the file holds; from_pretrained refuses it.
  const buf = await fs.readFile(weights);
  if (buf.length < 8 || 8 + Number(buf.readBigUInt64LE(0)) > buf.length) {
    throw new SetupError(
      'draft-model',
      'safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer',
    );
  }
  const { config } = await readSimRecord(dir).catch(() => ({ config: {} as Record<string, unknown> }));
  const rec = (config.aerie_sim ?? {}) as Carried['record'];
  return { record: rec };
}

function checkpointPattern(rev: Revision): RegExp {
  return rev === 'v0.2-resume' ? /^epoch_(\d+)(?:_step_(\d+))?$/ : /^epoch_(\d+)$/;
}

/** get_last_checkpoint as each revision has it: the newest matching directory, or null. */
async function lastCheckpoint(
  outputDir: string,
  rev: Revision,
): Promise<{ dir: string; epoch: number; step: number } | null> {
  const re = checkpointPattern(rev);
  let best: { dir: string; epoch: number; step: number } | null = null;
  for (const name of await fs.readdir(outputDir)) {
    const m = re.exec(name);
    if (!m || !(await isDir(path.join(outputDir, name)))) continue;
    const epoch = Number(m[1]);
    const step = m[2] ? Number(m[2]) : 0;
    if (!best || epoch > best.epoch || (epoch === best.epoch && step > best.step))
      best = { dir: path.join(outputDir, name), epoch, step };
  }
  return best;
}

function isHubId(p: string): boolean {
  return /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(p);
}

export async function setUp(a: ParsedArgs, rev: Revision, worldSize = 1): Promise<Setup> {
  const logs: string[] = [];
  const target = String(a.target_model_path);
  if (!(await isDir(target)) && !isHubId(target)) {
    throw new SetupError(
      'target-model',
      `OSError: Incorrect path_or_model_id: '${target}'. Please provide either the path to a local folder or the repo_id of a model on the Hub.`,
    );
  }
  let draftConfig =
    a.draft_model_config === null
      ? draftFromTarget(await readJson(path.join(target, 'config.json'), 'draft-model'))
      : await readJson(String(a.draft_model_config), 'draft-model');

  let carried: Carried = { record: {} };
  if (a.ckpt_dir !== null) {
    const dir = String(a.ckpt_dir);
    if (!(await isDir(dir)))
      throw new SetupError('draft-model', `ValueError: Provided base model dir ${dir} is not a valid directory.`);
    draftConfig = await readJson(path.join(dir, 'config.json'), 'draft-model');
    carried = await loadWeightsFrom(dir);
  }

  let startEpoch = 0;
  let startStep = 0;
  let restored = false;
  const outputDir = String(a.output_dir);
  if (a.resume === true && (await isDir(outputDir))) {
    const last = await lastCheckpoint(outputDir, rev);
    // print(), not the logger, and on every rank (SpecForge@20e2e3f0:scripts/train_eagle3.py:522).
    if (rev === 'v0.2-resume')
      for (let r = 0; r < worldSize; r++) logs.push(`Last checkpoint detected: ${last ? last.dir : 'None'}`);
    // A miss replaces whatever --ckpt-dir chose: the run starts from fresh weights.
    carried = last ? await loadWeightsFrom(last.dir) : { record: {} };
    if (last) draftConfig = await readJson(path.join(last.dir, 'config.json'), 'draft-model').catch(() => draftConfig);
    if (last && rev === 'v0.2-resume') {
      const state = await readTrainingState(last.dir);
      startEpoch = state?.epoch ?? last.epoch;
      startStep = state?.globalStep ?? last.step;
      restored = state !== null;
    }
  }

  let dims: DraftDims;
  try {
    dims = draftDims(draftConfig);
  } catch (e) {
    throw new SetupError('draft-model', `AttributeError: ${(e as Error).message}`);
  }
  if (dims.draftVocab > dims.vocab) {
    throw new SetupError(
      'draft-model',
      `ValueError: draft_vocab_size (${dims.draftVocab}) cannot exceed vocab_size (${dims.vocab})`,
    );
  }

  let samples: number;
  try {
    samples = await countJsonlRows(String(a.train_data_path));
    if (a.train_hidden_states_path !== null) samples = await countHiddenStateFiles(String(a.train_hidden_states_path));
  } catch (e) {
    if (e instanceof DatasetError) throw new SetupError('dataset', e.message);
    throw e;
  }
  // At 73e6f808 --ckpt-dir leaves draft_model_config a path string, which build_dataloaders then
  // asks for .vocab_size (SpecForge@73e6f808:scripts/train_eagle3.py:338,402; fixed in 07959b44).
  if (a.ckpt_dir !== null && rev === 'v0.2.0')
    throw new SetupError('vocab-mapping', "AttributeError: 'str' object has no attribute 'vocab_size'");
  return { draftConfig, dims, carried, startEpoch, startStep, restored, samples, logs };
}
