/**
 * v0.2 checkpoints: `<output-dir>/epoch_{e}_step_{s}/{training_state.pt, config.json,
 * model.safetensors}` (SpecForge@73e6f808:scripts/train_eagle3.py:466; the same at
 * 20e2e3f0:699), written in place and in that order, by rank 0 only: makedirs, torch.save of
 * the training state, then save_pretrained (SpecForge@20e2e3f0:scripts/train_eagle3.py:699-727).
 * No temp name, no rename and no per-rank files, so a crash or a kill mid-save leaves a
 * directory under the real name that lacks its weights or holds a file cut short; a rerun of
 * the same step overwrites the files one by one.
 */
import { promises as fs } from 'node:fs';
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

/**
 * `cut`: die mid-save, leaving what a real checkpoint caught mid-save holds (test/fixtures/real/specforge-20e2e3f0/orphaned-worker/ls-after-kill.txt):
 * the directory under its real name holding a training_state.pt cut short and nothing else.
 */
export async function writeCheckpoint(outputDir: string, c: CheckpointContent, cut = false): Promise<string> {
  const dir = path.join(outputDir, checkpointName(c.epoch, c.globalStep));
  await fs.mkdir(dir, { recursive: true });
  const state = trainingStateBytes(c);
  await writeSynced(path.join(dir, 'training_state.pt'), cut ? state.subarray(0, Math.floor(state.length / 4)) : state);
  if (cut) return dir;
  await writeSynced(path.join(dir, 'config.json'), `${JSON.stringify(savedConfig(c), null, 2)}\n`);
  await writeDrafterSafetensors(path.join(dir, 'model.safetensors'), c.dims);
  return dir;
}

/** The training a checkpoint carries, from its config.json (0 for a drafter not made here). */
export async function readSimRecord(
  ckptDir: string,
): Promise<{ config: Record<string, unknown>; sampleEpochs: number }> {
  const config = JSON.parse(await fs.readFile(path.join(ckptDir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const rec = config.aerie_sim as Partial<SimRecord> | undefined;
  const sampleEpochs = typeof rec?.trained_sample_epochs === 'number' ? rec.trained_sample_epochs : 0;
  return { config, sampleEpochs };
}

/** epoch and global_step from training_state.pt; null when it is not one the simulator wrote. */
export async function readTrainingState(ckptDir: string): Promise<{ epoch: number; globalStep: number } | null> {
  try {
    const s = JSON.parse(await fs.readFile(path.join(ckptDir, 'training_state.pt'), 'utf8')) as Record<string, unknown>;
    if (Number.isInteger(s.epoch) && Number.isInteger(s.global_step))
      return { epoch: s.epoch as number, globalStep: s.global_step as number };
  } catch {
    /* a real pickle, or missing: the caller falls back */
  }
  return null;
}
