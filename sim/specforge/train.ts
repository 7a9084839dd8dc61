/**
 * `aerie-sim specforge train -c config.yaml [section.field=value ...]`: stands in for the
 * current SpecForge CLI's training. Checkpoints are `<output_dir>/<run_id>-step<N>/` with
 * `training_state.pt` (a JSON stand-in for the pickle) and `training_state_rank0.pt`, a
 * `<run_id>-latest` symlink beside them, rotation by max_checkpoints, and fork semantics
 * (saving step S first deletes steps ≥ S). `training.resume_from` restores the step, the
 * epoch and the training carried so far, and refuses a different world size. Checkpoints are
 * not servable: `specforge export --to sglang` makes the drafter (export.ts).
 *
 * Log: tqdm meters on stderr (`Training: 12%|█▏ | 24/192 [.., epoch=0, loss=4.31, acc=0.37]`),
 * logging lines on stdout (`step 50/192 epoch 0 | train/loss=… train/acc=…`,
 * `Saved checkpoint <dir>`). Environment as for `aerie-sim train`.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { countHiddenStateFiles, countJsonlRows, DatasetError } from '../train/data.js';
import { claimFault, crashText, faultPlan, oomText, setupErrorText, torchrunSummary } from '../train/faults.js';
import { acceptLength, roundTo, stepMetrics } from '../train/quality.js';
import { draftDims } from '../train/safetensors.js';
import { formatMeter } from '../train/tqdm.js';
import { ConfigValidationError, loadRunConfig, type RunConfig } from './config.js';
import type { ScriptIO } from './prepare.js';

const STEP_S = 0.5;
const STARTUP_S = 20;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface TrainState {
  run_id: string;
  global_step: number;
  epoch: number;
  world_size: number;
  draft_config: Record<string, unknown>;
  aerie_sim: { trained_steps: number; trained_sample_epochs: number; accept_length: number; samples_per_epoch: number; steps_per_epoch: number };
}

/** What resume_from may name: a checkpoint dir, its training_state.pt, file://…, or a run root with one `*-latest`. */
export async function resolveCheckpoint(p: string): Promise<string> {
  let dir = p.startsWith('file://') ? p.slice(7) : p;
  if (path.basename(dir) === 'training_state.pt') dir = path.dirname(dir);
  if (await fs.stat(path.join(dir, 'training_state.pt')).catch(() => null)) return path.resolve(dir);
  const entries = await fs.readdir(dir).catch(() => null);
  if (!entries) throw new Error(`FileNotFoundError: checkpoint path does not exist: ${dir}`);
  const latest = entries.filter((e) => e.endsWith('-latest'));
  if (latest.length === 1) return fs.realpath(path.join(dir, latest[0]!));
  throw new Error(`FileNotFoundError: no complete checkpoint found under ${dir}`);
}

export async function readState(dir: string): Promise<TrainState> {
  return JSON.parse(await fs.readFile(path.join(dir, 'training_state.pt'), 'utf8')) as TrainState;
}

async function stepDirs(out: string, runId: string): Promise<{ step: number; dir: string }[]> {
  const re = new RegExp(`^${runId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-step(\\d+)$`);
  const names = await fs.readdir(out).catch(() => [] as string[]);
  return names.flatMap((n) => {
    const m = re.exec(n);
    return m ? [{ step: Number(m[1]), dir: path.join(out, n) }] : [];
  });
}

async function saveCheckpoint(out: string, st: TrainState, maxCheckpoints: number): Promise<string> {
  await fs.mkdir(out, { recursive: true });
  for (const s of await stepDirs(out, st.run_id)) if (s.step >= st.global_step) await fs.rm(s.dir, { recursive: true, force: true });
  const name = `${st.run_id}-step${st.global_step}`;
  const tmp = path.join(out, `.${name}.tmp-${process.pid}`);
  await fs.mkdir(tmp, { recursive: true });
  await fs.writeFile(path.join(tmp, 'training_state_rank0.pt'), JSON.stringify({ optimizer: 'aerie-sim', rng: st.global_step }) + '\n');
  await fs.writeFile(path.join(tmp, 'training_state.pt'), JSON.stringify(st, null, 1) + '\n');
  await fs.rename(tmp, path.join(out, name));
  const link = path.join(out, `${st.run_id}-latest`);
  await fs.rm(link, { force: true });
  await fs.symlink(name, link);
  if (maxCheckpoints > 0) {
    const all = (await stepDirs(out, st.run_id)).sort((a, b) => b.step - a.step);
    for (const old of all.slice(maxCheckpoints)) await fs.rm(old.dir, { recursive: true, force: true });
  }
  return path.join(out, name);
}

async function countSamples(c: RunConfig): Promise<number> {
  const d = c.data!;
  if (d.hidden_states_path) return countHiddenStateFiles(String(d.hidden_states_path));
  return countJsonlRows(String(d.train_data_path || d.prompts_path));
}

export async function runSpecforgeTrain(configPath: string, overrides: string[], io: ScriptIO): Promise<number> {
  const log = (m: string): void => io.out(`${m}\n`);
  const fail = (text: string): number => (io.err(text + torchrunSummary(1, new Date(), 'specforge/cli.py')), 1);
  let c: RunConfig;
  try {
    c = loadRunConfig(await fs.readFile(configPath, 'utf8'), overrides);
  } catch (e) {
    if (e instanceof ConfigValidationError) return io.err(`Traceback (most recent call last):\n  File "/usr/local/bin/specforge", line 8, in <module>\n${e.message}\n`), 1;
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return io.err(`FileNotFoundError: [Errno 2] No such file or directory: '${configPath}'\n`), 1;
    throw e;
  }
  const m = c.model!;
  const t = c.training!;
  const runId = String(c.top.run_id);
  const out = String(c.top.output_dir);
  const world = Number(c['deployment.trainer']!.nproc_per_node) * Number(c['deployment.trainer']!.nnodes);
  const scale = Math.max(0, Number(io.env.AERIE_SIM_TIME_SCALE ?? '1')) || 0;
  const faults = faultPlan(io.env);

  let draftConfig: Record<string, unknown>;
  try {
    draftConfig = JSON.parse(await fs.readFile(String(m.draft_model_config ?? path.join(String(m.target_model_path), 'config.json')), 'utf8')) as Record<string, unknown>;
    draftDims(draftConfig);
  } catch (e) {
    return fail(setupErrorText('draft-model', `FileNotFoundError: ${(e as Error).message}`));
  }
  let samples: number;
  try {
    samples = await countSamples(c);
  } catch (e) {
    if (e instanceof DatasetError) return fail(setupErrorText('dataset', e.message));
    throw e;
  }
  const dp = Math.max(1, Math.floor(world / Number(t.tp_size)));
  const stepsPerEpoch = Math.ceil(samples / (Number(t.batch_size) * dp * Number(t.accumulation_steps)));
  const epochs = Number(t.num_epochs);
  const maxSteps = t.max_steps === null ? epochs * stepsPerEpoch : Math.min(Number(t.max_steps), epochs * stepsPerEpoch);

  let step = 0;
  let carried = 0;
  if (t.resume_from !== null) {
    let st: TrainState;
    try {
      const dir = await resolveCheckpoint(String(t.resume_from));
      st = await readState(dir);
      if (st.world_size !== world) {
        return fail(setupErrorText('draft-model', `ValueError: checkpoint ${dir} has no usable per-rank state for rank 0 at world_size=${world} (written at world_size=${st.world_size}): resume at the original world size`));
      }
      log(`Resuming from ${dir}: global_step=${st.global_step} epoch=${st.epoch}`);
    } catch (e) {
      return fail(setupErrorText('draft-model', (e as Error).message));
    }
    step = st.global_step;
    carried = st.aerie_sim.trained_steps;
  }
  log(`[specforge] run_id=${runId} output_dir=${out} strategy=${t.strategy} mode=${c.data!.hidden_states_path ? 'offline' : 'online'} world_size=${world}`);
  log(`[specforge] dataset: ${samples} samples, steps_per_epoch=${stepsPerEpoch}, num_epochs=${epochs}, total_steps=${maxSteps}`);
  await sleep(STARTUP_S * scale * 1000);

  const record = (steps: number): TrainState['aerie_sim'] => {
    const se = roundTo((steps * samples) / Math.max(1, stepsPerEpoch), 6);
    return { trained_steps: steps, trained_sample_epochs: se, accept_length: acceptLength(se), samples_per_epoch: samples, steps_per_epoch: stepsPerEpoch };
  };
  const stateAt = (s: number): TrainState => ({
    run_id: runId,
    global_step: s,
    epoch: Math.floor(s / Math.max(1, stepsPerEpoch)),
    world_size: world,
    draft_config: draftConfig,
    aerie_sim: record(carried + s - step0),
  });
  const step0 = step;
  const started = Date.now();
  let ranThisLaunch = 0;
  while (step < maxSteps) {
    step++;
    if (faults.oom && ranThisLaunch === 0 && claimFault(faults)) return fail(`\n${oomText()}`);
    if (faults.crashAtStep === step && claimFault(faults)) return fail(`\n${crashText()}`);
    await sleep(STEP_S * scale * 1000);
    ranThisLaunch++;
    const { loss, acc } = stepMetrics(record(carried + step - step0).trained_sample_epochs, step);
    const epoch = Math.floor((step - 1) / Math.max(1, stepsPerEpoch));
    const postfix = { epoch: String(epoch), loss: loss.toFixed(2), acc: acc.toFixed(2) };
    io.err(`\r${formatMeter({ desc: 'Training', n: step, total: maxSteps, elapsedS: (Date.now() - started) / 1000, postfix })}`);
    if (step % Number(t.log_interval) === 0) log(`step ${step}/${maxSteps} epoch ${epoch} | train/loss=${loss.toFixed(4)} train/acc=${acc.toFixed(4)} train/lr=${Number(t.learning_rate)}`);
    if (Number(t.save_interval) > 0 && step % Number(t.save_interval) === 0) log(`Saved checkpoint ${await saveCheckpoint(out, stateAt(step), Number(t.max_checkpoints))}`);
  }
  io.err('\n');
  if (!(Number(t.save_interval) > 0 && step % Number(t.save_interval) === 0)) log(`Saved checkpoint ${await saveCheckpoint(out, stateAt(step), Number(t.max_checkpoints))}`);
  log(`Training finished at step ${step}`);
  return 0;
}
