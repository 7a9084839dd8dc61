/**
 * `aerie-sim train <flags>`: stands in for `torchrun ... scripts/train_eagle3.py <flags>` of
 * SpecForge v0.2 at the revision AERIE_SIM_SPECFORGE_REVISION names (sim/specforge/revision.ts;
 * v0.2.0 by default). Same flags and argparse errors (options.ts), only the lines the real
 * script gets into its log (its print()s on stdout, tqdm's meter on stderr; every
 * print_on_rank0/print_with_rank goes to an unconfigured logger.info and is dropped,
 * SpecForge@73e6f808:specforge/utils.py:52-61), the same checkpoint layout, written in place
 * as the real one is (checkpoint.ts), and a drafter whose quality follows from how much it was
 * trained (sim/train/quality.ts).
 *
 * Environment: AERIE_SIM_TIME_SCALE (1 = ~0.5 s a step), AERIE_SIM_SPECFORGE_REVISION, and the
 * fault switches in faults.ts. One GPU per tensor-parallel rank is assumed (data-parallel
 * size 1), so an epoch is ceil(samples / (tp-size × batch-size)) steps.
 */
import path from 'node:path';
import { gpusFor, holdGpus } from '../gpu/registry.js';
import { argsDump, parseTrainArgs, type ParsedArgs, type V02Revision } from './args.js';
import { writeCheckpoint, type SimRecord } from './checkpoint.js';
import {
  claimFault,
  crashText,
  faultPlan,
  oomText,
  SCRIPT,
  setupErrorText,
  teardownText,
  torchrunSummary,
} from './faults.js';
import { acceptLength, roundTo, stepMetrics } from './quality.js';
import { simSpecforgeRevision } from '../specforge/revision.js';
import { SetupError, setUp, type Setup } from './setup.js';
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
  const rev = simSpecforgeRevision(io.env);
  if (rev === 'cli') {
    // The script is gone at the CLI revisions (removed upstream in d5883d5b): python's own refusal.
    io.err(`/usr/bin/python3: can't open file '${SCRIPT}': [Errno 2] No such file or directory\n${torchrunSummary(2)}`);
    return 1;
  }
  const parsed = parseTrainArgs(argv, rev);
  if (parsed.kind === 'help') {
    io.out(parsed.text);
    return 0;
  }
  if (parsed.kind === 'error') {
    io.err(parsed.text);
    return 2;
  }
  const onTerm = (): void => {
    io.err(
      `W0000 00:00:00.000000 ${process.pid} torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers\n`,
    );
    process.exit(143);
  };
  process.on('SIGTERM', onTerm);
  try {
    return await train(parsed.args, io, rev);
  } finally {
    process.off('SIGTERM', onTerm);
  }
}

async function train(a: ParsedArgs, io: TrainerIO, rev: V02Revision): Promise<number> {
  // One rank per tensor-parallel GPU, each holding the drafter, target activations and optimizer state.
  holdGpus(gpusFor(Number(a.tp_size) || 1, io.env), 22_000, io.env);
  const scale = timeScale(io.env);
  const faults = faultPlan(io.env);
  const tp = Number(a.tp_size);
  const batch = Number(a.batch_size);
  const fail = (text: string): number => {
    io.err(text + torchrunSummary(1));
    return 1;
  };

  // print_args_with_dots, a real print, from ee22b877 on (SpecForge@03a3dedb:scripts/train_eagle3.py:650;
  // specforge/utils.py:59-71); the v0.2.0 release prints no args.
  if (rev !== 'v0.2.0')
    io.out(
      argsDump(
        a,
        [
          ['dp_size', 1],
          ['target_batch_size', tp * batch],
        ],
        rev,
      ),
    );
  let s: Setup;
  try {
    s = await setUp(a, rev, tp);
  } catch (e) {
    if (e instanceof SetupError) return fail(setupErrorText(e.where, e.exception, rev));
    throw e;
  }
  for (const l of s.logs) io.out(`${l}\n`);
  await sleep(STARTUP_S * scale * 1000);

  const samples = s.samples;
  const stepsPerEpoch = Math.ceil(samples / (tp * batch));
  const epochs = Number(a.num_epochs);

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
    return {
      accept_length: acceptLength(sampleEpochs),
      trained_sample_epochs: sampleEpochs,
      trained_steps: steps,
      samples_per_epoch: samples,
      steps_per_epoch: stepsPerEpoch,
    };
  };

  const outputDir = String(a.output_dir);
  const saveInterval = Number(a.save_interval);
  const maxSteps = a.max_num_steps === null ? Infinity : Number(a.max_num_steps);
  const args = Object.fromEntries(Object.entries(a));
  // save_checkpoints prints nothing that reaches the log (SpecForge@73e6f808:scripts/train_eagle3.py:459-498).
  const save = async (epoch: number, step: number, stepsRun: number): Promise<number | undefined> => {
    await sleep(SAVE_S * scale * 1000);
    const cut = faults.crashInSaveAt === step && claimFault(faults);
    await writeCheckpoint(
      outputDir,
      { draftConfig: s.draftConfig, dims: s.dims, epoch, globalStep: step, sim: simAfter(stepsRun), args },
      cut,
    );
    return cut ? fail(`\n${crashText(rev)}`) : undefined;
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
    // A working --resume still walks the batches it skips, so tqdm counts them (SpecForge@20e2e3f0:scripts/train_eagle3.py:1132-1133,1168-1171).
    const skip = epoch === s.startEpoch ? Math.max(0, s.startStep - s.startEpoch * stepsPerEpoch) : 0;
    io.err(`\r${formatMeter({ desc, n: 0, total: stepsPerEpoch, elapsedS: 0 })}`);
    if (skip > 0)
      io.err(`\r${formatMeter({ desc, n: Math.min(skip, stepsPerEpoch), total: stepsPerEpoch, elapsedS: 0 })}`);
    for (let n = skip; n < stepsPerEpoch; n++) {
      globalStep++;
      const stepStart = Date.now();
      if (faults.oom && stepsRun === 0 && claimFault(faults)) return fail(`\n${oomText(rev)}`);
      if (faults.crashAtStep === globalStep && claimFault(faults)) return fail(`\n${crashText(rev)}`);
      await sleep(STEP_S * scale * 1000);
      stepsRun++;
      const postfix = meterPostfix(
        rev,
        stepMetrics(simAfter(stepsRun).trained_sample_epochs, globalStep),
        (Date.now() - stepStart) / 1000,
      );
      io.err(
        `\r${formatMeter({ desc, n: n + 1, total: stepsPerEpoch, elapsedS: (Date.now() - epochStart) / 1000, postfix })}`,
      );
      // SpecForge@73e6f808:scripts/train_eagle3.py:820-825
      if (globalStep % saveInterval === 0) {
        const died = await save(epoch, globalStep, stepsRun);
        if (died !== undefined) return died;
      }
      if (globalStep >= maxSteps) {
        stop = true;
        break;
      }
    }
    io.err('\n');
  }
  // The final save exists from 03a3dedb (SpecForge@03a3dedb:scripts/train_eagle3.py:865-870); v0.2.0 just stops.
  if (rev !== 'v0.2.0' && globalStep % saveInterval !== 0) {
    const died = await save(Math.max(s.startEpoch, epoch - 1), globalStep, stepsRun);
    if (died !== undefined) return died;
  }
  // The simulator's mesh always has a size-1 dim (data-parallel size 1): the old teardown raises.
  if (rev !== 'v0.2-resume') return fail(`\n${teardownText(rev)}`);
  return 0;
}

/** set_postfix: loss/acc/time (SpecForge@73e6f808:scripts/train_eagle3.py:772-778); acceptance_rate and grad_norm at 20e2e3f0 (…:1280-1288). */
function meterPostfix(rev: V02Revision, m: { loss: number; acc: number }, seconds: number): Record<string, string> {
  const time = `${seconds.toFixed(2)}s`;
  if (rev !== 'v0.2-resume') return { loss: m.loss.toFixed(2), acc: m.acc.toFixed(2), time };
  return {
    loss: m.loss.toFixed(2),
    acc: m.acc.toFixed(2),
    acceptance_rate: (m.acc * 0.9).toFixed(2),
    time,
    grad_norm: (0.5 + m.loss / 10).toFixed(2),
  };
}
