/**
 * v0.2 checkpoints: `<output-dir>/epoch_{e}_step_{s}/{config.json, model.safetensors,
 * training_state.pt}`. Each is assembled in a dot-named temp directory beside it and renamed
 * into place, so a crash or a kill leaves either the whole checkpoint or none of it under the
 * real name; an existing checkpoint of the same name (a rerun) is replaced the same way.
 */
import { promises as fs, rmSync } from 'node:fs';
import path from 'node:path';
import { writeDrafterSafetensors, type DraftDims } from './safetensors.js';

export const checkpointName = (epoch: number, step: number): string => `epoch_${epoch}_step_${step}`;

/** What the simulator records about a drafter's training, inside its config.json. */
export interface SimRecord {
  accept_length: number;
  trained_sample_epochs: number;
}

export interface CheckpointContent {
  draftConfig: Record<string, unknown>;
  dims: DraftDims;
  epoch: number;
  globalStep: number;
  sim: SimRecord;
  args: Record<string, unknown>;
}

/** The temp directory being filled right now, so a SIGTERM handler can remove it. */
let inFlight: string | undefined;
export function removeInFlightCheckpoint(): void {
  if (inFlight) rmSync(inFlight, { recursive: true, force: true });
  inFlight = undefined;
}

async function writeSynced(file: string, data: string | Buffer): Promise<void> {
  const fh = await fs.open(file, 'w');
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

export function savedConfig(c: CheckpointContent): Record<string, unknown> {
  const { aerie_sim: _old, ...rest } = c.draftConfig;
  return {
    ...rest,
    architectures: ['LlamaForCausalLMEagle3'],
    torch_dtype: 'bfloat16',
    aerie_sim: c.sim,
  };
}

/** Stands in for torch.save's pickle; the simulator reads it back when resuming. */
export function trainingStateBytes(c: CheckpointContent): Buffer {
  const state = {
    note: 'aerie-sim training state (stands in for a torch.save pickle: epoch, global_step, args, optimizer)',
    epoch: c.epoch,
    global_step: c.globalStep,
    aerie_sim: c.sim,
    args: c.args,
  };
  return Buffer.from(`${JSON.stringify(state, null, 1)}\n`);
}

export async function writeCheckpoint(outputDir: string, c: CheckpointContent): Promise<string> {
  const name = checkpointName(c.epoch, c.globalStep);
  const final = path.join(outputDir, name);
  const tmp = path.join(outputDir, `.${name}.tmp-${process.pid}`);
  await fs.mkdir(outputDir, { recursive: true });
  await fs.rm(tmp, { recursive: true, force: true });
  inFlight = tmp;
  await fs.mkdir(tmp);
  await writeSynced(path.join(tmp, 'training_state.pt'), trainingStateBytes(c));
  await writeSynced(path.join(tmp, 'config.json'), `${JSON.stringify(savedConfig(c), null, 2)}\n`);
  await writeDrafterSafetensors(path.join(tmp, 'model.safetensors'), c.dims);
  const old = path.join(outputDir, `.${name}.old-${process.pid}`);
  let replaced = false;
  try {
    await fs.rename(final, old);
    replaced = true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  await fs.rename(tmp, final);
  inFlight = undefined;
  if (replaced) await fs.rm(old, { recursive: true, force: true });
  const dh = await fs.open(outputDir, 'r');
  try {
    await dh.sync();
  } finally {
    await dh.close();
  }
  return final;
}

/** The training a checkpoint carries, from its config.json (0 for a drafter not made here). */
export async function readSimRecord(ckptDir: string): Promise<{ config: Record<string, unknown>; sampleEpochs: number }> {
  const config = JSON.parse(await fs.readFile(path.join(ckptDir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const rec = config.aerie_sim as Partial<SimRecord> | undefined;
  const sampleEpochs = typeof rec?.trained_sample_epochs === 'number' ? rec.trained_sample_epochs : 0;
  return { config, sampleEpochs };
}

/** epoch and global_step from training_state.pt; null when it is not one the simulator wrote. */
export async function readTrainingState(ckptDir: string): Promise<{ epoch: number; globalStep: number } | null> {
  try {
    const s = JSON.parse(await fs.readFile(path.join(ckptDir, 'training_state.pt'), 'utf8')) as Record<string, unknown>;
    if (Number.isInteger(s.epoch) && Number.isInteger(s.global_step)) return { epoch: s.epoch as number, globalStep: s.global_step as number };
  } catch {
    /* a real pickle, or missing: the caller falls back */
  }
  return null;
}
