/**
 * `aerie-sim train <flags>`: stands in for `torchrun ... scripts/train_eagle3.py <flags>` of
 * SpecForge v0.2. Same flags and argparse errors, the same log lines (print/logging on
 * stdout, tqdm meters on stderr), the same checkpoint layout, and a drafter whose quality
 * follows from how much it was trained (sim/train/quality.ts).
 *
 * Environment: AERIE_SIM_TIME_SCALE (1 = ~0.5 s a step), AERIE_SIM_SPECFORGE_REV (see
 * setup.ts), and the fault switches in faults.ts. One GPU per tensor-parallel rank is
 * assumed (data-parallel size 1), so an epoch is ceil(samples / (tp-size × batch-size)) steps.
 */
import path from 'node:path';
import { gpusFor, holdGpus } from '../gpu/registry.js';
import { argsDump, parseTrainArgs, type ParsedArgs } from './args.js';
import { checkpointName, removeInFlightCheckpoint, writeCheckpoint, type SimRecord } from './checkpoint.js';
import { claimFault, crashText, faultPlan, oomText, setupErrorText, torchrunSummary } from './faults.js';
import { acceptLength, roundTo, stepMetrics } from './quality.js';
import { revisionOf, SetupError, setUp, type Setup } from './setup.js';
import { formatMeter } from './tqdm.js';

const STEP_S = 0.5;
const STARTUP_S = 20;
const SAVE_S = 2;

export interface TrainerIO {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
}

const processIO: TrainerIO = {
  out: (t) => void process.stdout.write(t),
  err: (t) => void process.stderr.write(t),
  env: process.env,
};

function timeScale(env: NodeJS.ProcessEnv): number {
  const s = Number(env.AERIE_SIM_TIME_SCALE ?? '1');
  return Number.isFinite(s) && s >= 0 ? s : 1;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function runTrainer(argv: string[], io: TrainerIO = processIO): Promise<number> {
  const parsed = parseTrainArgs(argv);
  if (parsed.kind === 'help') {
    io.out(parsed.text);
    return 0;
  }
  if (parsed.kind === 'error') {
    io.err(parsed.text);
    return 2;
  }
  const onTerm = (): void => {
    removeInFlightCheckpoint();
    io.err(`W0000 00:00:00.000000 ${process.pid} torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers\n`);
    process.exit(143);
  };
  process.on('SIGTERM', onTerm);
  try {
    return await train(parsed.args, io);
  } finally {
    process.off('SIGTERM', onTerm);
  }
}

async function train(a: ParsedArgs, io: TrainerIO): Promise<number> {
  // One rank per tensor-parallel GPU, each holding the drafter, target activations and optimizer state.
  holdGpus(gpusFor(Number(a.tp_size) || 1, io.env), 22_000, io.env);
  const scale = timeScale(io.env);
  const faults = faultPlan(io.env);
  const rev = revisionOf(io.env);
  const tp = Number(a.tp_size);
  const batch = Number(a.batch_size);
  const log = (m: string): void => io.out(`${m}\n`);
  const fail = (text: string): number => {
    io.err(text + torchrunSummary(1));
    return 1;
  };

  io.out(argsDump(a, [['dp_size', 1], ['target_batch_size', tp * batch]]));
  log('rank 0: Initialized distributed environment');
  let s: Setup;
  try {
    s = await setUp(a, rev);
  } catch (e) {
    if (e instanceof SetupError) return fail(setupErrorText(e.where, e.exception));
    throw e;
  }
  s.logs.forEach(log);
  await sleep(STARTUP_S * scale * 1000);

  const samples = s.samples;
  const stepsPerEpoch = Math.ceil(samples / (tp * batch));
  const epochs = Number(a.num_epochs);
  log('rank 0: Loaded vocab mapping');
  if (a.total_steps === null) {
    const spe = Math.ceil(stepsPerEpoch / Number(a.draft_accumulation_steps));
    log(`rank 0: Auto-calculated total_steps: ${epochs * spe} (num_epochs=${epochs} * steps_per_epoch=${spe})`);
  } else log(`rank 0: Using provided total_steps: ${a.total_steps}`);
  log('rank 0: Initialized Eagle3 FSDP model');
  log('rank 0: Initialized optimizer and scheduler');
  if (s.restored) log(`Restored optimizer/scheduler state: epoch=${s.startEpoch}, step=${s.startStep}, lr=${Number(a.learning_rate).toFixed(6)}`);
  log(rev === '2026-03' ? `Starting training from epoch:${s.startEpoch}          step:${s.startStep}` : `Starting training from epoch ${s.startEpoch}`);

  // Training carried in by the starting weights continues to count; on the same data the
  // count is kept in whole steps so a continued run lands on exactly the uninterrupted result.
  const carried = s.carried.record;
  const sameData = carried.samples_per_epoch === samples && carried.steps_per_epoch === stepsPerEpoch;
  const carriedSteps = Number.isInteger(carried.trained_steps) ? (carried.trained_steps as number) : 0;
  const simAfter = (stepsRun: number): SimRecord & Record<string, number> => {
    const steps = carriedSteps + stepsRun;
    const perStep = samples / Math.max(1, stepsPerEpoch);
    const se = sameData ? steps * perStep : (carried.trained_sample_epochs ?? 0) + stepsRun * perStep;
    const sampleEpochs = roundTo(se, 6);
    return { accept_length: acceptLength(sampleEpochs), trained_sample_epochs: sampleEpochs, trained_steps: steps, samples_per_epoch: samples, steps_per_epoch: stepsPerEpoch };
  };

  const outputDir = String(a.output_dir);
  const saveInterval = Number(a.save_interval);
  const maxSteps = a.max_num_steps === null ? Infinity : Number(a.max_num_steps);
  const args = Object.fromEntries(Object.entries(a));
  const save = async (epoch: number, step: number, stepsRun: number): Promise<void> => {
    await sleep(SAVE_S * scale * 1000);
    const dir = path.join(outputDir, checkpointName(epoch, step));
    await writeCheckpoint(outputDir, { draftConfig: s.draftConfig, dims: s.dims, epoch, globalStep: step, sim: simAfter(stepsRun), args });
    log(`Saved full training state to ${dir}/training_state.pt`);
    log(`Saved model configuration to ${dir}`);
  };

  let globalStep = s.startStep;
  let stepsRun = 0;
  let epoch = s.startEpoch;
  let stop = false;
  for (epoch = s.startEpoch; epoch < epochs && !stop; epoch++) {
    const desc = `Training Epoch ${epoch}`;
    if (stepsPerEpoch === 0) {
      io.err(`\r${desc}: 0it [00:00, ?it/s]\n`);
      continue;
    }
    const epochStart = Date.now();
    const skip = epoch === s.startEpoch ? Math.max(0, s.startStep - s.startEpoch * stepsPerEpoch) : 0;
    io.err(`\r${formatMeter({ desc, n: Math.min(skip, stepsPerEpoch), total: stepsPerEpoch, elapsedS: 0 })}`);
    for (let n = skip; n < stepsPerEpoch; n++) {
      globalStep++;
      const stepStart = Date.now();
      if (faults.oom && stepsRun === 0 && claimFault(faults)) return fail(`\n${oomText()}`);
      if (faults.crashAtStep === globalStep && claimFault(faults)) return fail(`\n${crashText()}`);
      await sleep(STEP_S * scale * 1000);
      stepsRun++;
      const { loss, acc } = stepMetrics(simAfter(stepsRun).trained_sample_epochs, globalStep);
      const postfix = { loss: loss.toFixed(2), acc: acc.toFixed(2), time: `${((Date.now() - stepStart) / 1000).toFixed(2)}s` };
      io.err(`\r${formatMeter({ desc, n: n + 1, total: stepsPerEpoch, elapsedS: (Date.now() - epochStart) / 1000, postfix })}`);
      if (globalStep % saveInterval === 0) await save(epoch, globalStep, stepsRun);
      if (globalStep >= maxSteps) {
        stop = true;
        break;
      }
    }
    io.err('\n');
  }
  const lastEpoch = Math.max(s.startEpoch, epoch - 1);
  if (globalStep % saveInterval !== 0) {
    log(`Training completed at step ${globalStep}, saving final checkpoint...`);
    await save(lastEpoch, globalStep, stepsRun);
  }
  return 0;
}

