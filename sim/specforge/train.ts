/**
 * `aerie-sim specforge train -c config.yaml [section.field=value ...]`: stands in for the
 * current SpecForge CLI's offline training (HEAD a6b6b023 = PyPI specforge 0.2.0).
 *
 * What it prints, as HEAD does: nothing at start or end of a successful offline run (its
 * start-up messages go through print_with_rank → logger.info, and no logging handler is
 * configured, SpecForge@a6b6b023:specforge/utils.py:168-172); every `training.log_interval`
 * optimizer steps one `step N: {...}` dict line on stdout per rank (metrics.ts); tqdm's
 * `Training:` bar on stderr only when stderr is a TTY (controller.py:572-592); the rewind
 * warning on stderr when a save deletes later steps (checkpoint.py:109-120). No line names a
 * checkpoint. Checkpoints: checkpoint.ts. Environment as for `aerie-sim train`, plus
 * AERIE_SIM_SPECFORGE_CRASH_IN_SAVE=<step>[:<point>]: die (exit 137) inside that step's save at
 * one of checkpoint.ts's SavePoints; by default with one rank while rank 0's file is still an
 * empty temp name (what a real SIGKILL left), with several after rank 0's files, before the
 * other ranks'.
 *
 * World size N = deployment.trainer.nnodes × nproc_per_node (what HEAD's CLI hands torchrun,
 * SpecForge@a6b6b023:specforge/launch_plan.py:536-568): N dict lines per log step, N rank
 * files per save, the sampler's per-rank arithmetic below, per-rank resume refusals
 * (traceback.ts), torchrun's OMP_NUM_THREADS warning. Rank 0 alone prints the tqdm bar
 * (controller.py:580-581) and the rewind warning (checkpoint.py:85-86).
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { countHiddenStateFiles, countJsonlRows, DatasetError } from '../train/data.js';
import { claimFault, crashText, faultPlan, oomText, setupErrorText, torchrunSummary } from '../train/faults.js';
import { acceptLength, roundTo, stepMetrics } from '../train/quality.js';
import { draftDims } from '../train/safetensors.js';
import { formatMeter } from '../train/tqdm.js';
import { readResumeState, SAVE_POINTS, saveCheckpoint, type SavePoint, type SharedState } from './checkpoint.js';
import { ConfigValidationError, loadRunConfig, type RunConfig } from './config.js';
import { eagle3Metrics, pyDictLine, scheduledLr } from './metrics.js';
import type { ScriptIO } from './prepare.js';
import { CONTRACT_REFUSED, RESUME_REFUSED, ranksFailedText } from './traceback.js';

const STEP_S = 0.5;
const STARTUP_S = 20;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export type TrainIO = ScriptIO & { errIsTTY?: boolean };

/** torchrun's warning as its logger prints it: the bare message, no level or source prefix (seen in test/fixtures/real/specforge-a6b6b023-cpu-ws2/clean.log). */
function ompWarning(): string {
  return (
    '\n*****************************************\n' +
    'Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. \n' +
    '*****************************************\n'
  );
}

async function countSamples(c: RunConfig): Promise<number> {
  const d = c.data!;
  // list_feature_files walks hidden_states_path (runtime/data_plane/offline_reader.py:72-82).
  if (d.hidden_states_path) return countHiddenStateFiles(String(d.hidden_states_path));
  return countJsonlRows(String(d.train_data_path || d.prompts_path));
}

/** The trainer's resume contract (trainer.py:247-256,296-299; launch.py:649-653), in HEAD's key order. */
function resumeContract(
  world: number,
  perRank: number,
  samples: number,
  c: RunConfig,
  totalSteps: number,
): [string, unknown][] {
  const t = c.training!;
  return [
    ['world_size', world],
    ['dataset_size', perRank],
    ['batch_size', Number(t.batch_size)],
    ['accumulation_steps', Number(t.accumulation_steps)],
    ['num_epochs', Number(t.num_epochs)],
    ['effective_total_steps', totalSteps],
    ['tp_size', Number(t.tp_size)],
    ['sp_ulysses_size', Number(t.sp_ulysses_size ?? 1)],
    ['sp_ring_size', Number(t.sp_ring_size ?? 1)],
    ['offline_sampler_version', 1],
    ['sampler_seed', Number(t.seed)],
    ['source_dataset_size', samples],
  ];
}

export async function runSpecforgeTrain(configPath: string, overrides: string[], io: TrainIO): Promise<number> {
  const fail = (text: string): number => (io.err(text + torchrunSummary(1, new Date(), 'specforge/cli.py')), 1);
  let c: RunConfig;
  try {
    c = loadRunConfig(await fs.readFile(configPath, 'utf8'), overrides);
  } catch (e) {
    if (e instanceof ConfigValidationError)
      return (
        io.err(
          `Traceback (most recent call last):\n  File "/usr/local/bin/specforge", line 8, in <module>\n${e.message}\n`,
        ),
        1
      );
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      return (io.err(`FileNotFoundError: [Errno 2] No such file or directory: '${configPath}'\n`), 1);
    throw e;
  }
  const m = c.model!;
  const t = c.training!;
  const runId = String(c.top.run_id);
  const out = String(c.top.output_dir);
  const trainer = c['deployment.trainer'] ?? {};
  const world = Number(trainer.nproc_per_node ?? 1) * Number(trainer.nnodes ?? 1);
  const tracked = String(c.tracking?.report_to ?? 'none') !== 'none'; // assembly.py:294-317
  const tty = io.errIsTTY ?? process.stderr.isTTY === true;
  const scale = Math.max(0, Number(io.env.AERIE_SIM_TIME_SCALE ?? '1')) || 0;
  const faults = faultPlan(io.env);
  // `<step>[:<save point>]`; without a point, where a real SIGKILL landed: rank 0's temp file with
  // one rank, between rank 0's files and its peers' with several.
  const [crashStep, crashPoint] = (io.env.AERIE_SIM_SPECFORGE_CRASH_IN_SAVE ?? '').split(':');
  const crashInSave = crashStep ? Number(crashStep) : NaN;
  const killAt: SavePoint = SAVE_POINTS.includes(crashPoint as SavePoint)
    ? (crashPoint as SavePoint)
    : world > 1
      ? 'shared-written'
      : 'rank0-opened';
  if (crashPoint && !SAVE_POINTS.includes(crashPoint as SavePoint))
    return (io.err(`aerie-sim: AERIE_SIM_SPECFORGE_CRASH_IN_SAVE point must be one of ${SAVE_POINTS.join(', ')}\n`), 2);

  let draftConfig: Record<string, unknown>;
  try {
    draftConfig = JSON.parse(
      await fs.readFile(String(m.draft_model_config ?? path.join(String(m.target_model_path), 'config.json')), 'utf8'),
    ) as Record<string, unknown>;
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
  // Each DP rank gets ceil(N/dp) refs, DistributedSampler-padded (launch.py:219-239); partial
  // batches dropped (trainer.py:151); accumulation spans epochs (schedule.py:28-29).
  const dp = Math.max(1, Math.floor(world / Number(t.tp_size)));
  const batch = Number(t.batch_size);
  const accum = Number(t.accumulation_steps);
  const epochs = Number(t.num_epochs);
  const perRank = Math.ceil(samples / dp);
  const batchesPerEpoch = Math.floor(perRank / batch);
  const dataSteps = Math.floor((batchesPerEpoch * epochs) / accum);
  if (dataSteps < 1)
    return fail(
      setupErrorText(
        'dataset',
        `ValueError: training data produces no optimizer step: samples=${perRank}, batch_size=${batch}, accumulation_steps=${accum}, num_epochs=${epochs}`,
      ),
    );
  const maxSteps = t.max_steps === null || t.max_steps === undefined ? null : Number(t.max_steps);
  // The LR horizon: total_steps, else max_steps, else the data (schedule.py:8-36).
  const totalSteps = t.total_steps != null ? Number(t.total_steps) : (maxSteps ?? dataSteps);
  const stopAt = maxSteps === null ? dataSteps : Math.min(maxSteps, dataSteps);
  const contract = resumeContract(world, perRank, samples, c, totalSteps);

  let step = 0;
  let carried = 0;
  let lastSaved: number | null = null;
  if (t.resume_from !== null && t.resume_from !== undefined && t.resume_from !== '') {
    const from = String(t.resume_from);
    const everyRank = (msg: string): Map<number, string> => new Map(Array.from({ length: world }, (_, r) => [r, msg]));
    const refuse = (errors: Map<number, string>, frames: Parameters<typeof ranksFailedText>[2]): number => (
      io.err(ranksFailedText(world, errors, frames)),
      1
    );
    let resumed: Awaited<ReturnType<typeof readResumeState>>;
    try {
      resumed = await readResumeState(from, world);
    } catch (e) {
      const msg = (e as Error).message;
      // checkpoint.py:252-279: with several ranks an unreadable target is gathered and re-raised on each.
      const gathered =
        world > 1
          ? `RuntimeError: resume checkpoint '${from}' is not readable on every rank: ${Array.from({ length: world }, (_, r) => `rank ${r}: ${msg}`).join('; ')}`
          : msg;
      return refuse(everyRank(gathered), RESUME_REFUSED);
    }
    const { state, refusals } = resumed;
    if (refusals.size) return refuse(refusals, RESUME_REFUSED);
    // trainer.py:287-292
    if (state.strategy !== String(t.strategy)) {
      return refuse(
        everyRank(
          `ValueError: checkpoint ${from} was written by strategy '${state.strategy}'; this run trains '${t.strategy}'`,
        ),
        CONTRACT_REFUSED(289),
      );
    }
    // trainer.py:335-341: any recorded contract value that differs refuses the resume.
    for (const [key, now] of contract) {
      if (key in state.contract && JSON.stringify(state.contract[key]) !== JSON.stringify(now)) {
        return refuse(
          everyRank(
            `ValueError: checkpoint ${from} was written with ${key}=${String(state.contract[key])} but this run has ${key}=${String(now)}; resume with the original configuration`,
          ),
          CONTRACT_REFUSED(336),
        );
      }
    }
    step = state.global_step;
    carried = state.aerie_sim.trained_steps;
    lastSaved = step; // trainer.py:473-477: a no-op fit does not rewrite the checkpoint
  }
  // torch/distributed/run.py:872-882 (torch 2.13): torchrun's one warning, before any worker starts.
  if (world > 1 && !io.env.OMP_NUM_THREADS) io.err(ompWarning());
  await sleep(STARTUP_S * scale * 1000);

  const step0 = step;
  const record = (steps: number): SharedState['aerie_sim'] => {
    const se = roundTo((steps * samples) / Math.max(1, batchesPerEpoch / accum), 6);
    return {
      trained_steps: steps,
      trained_sample_epochs: se,
      accept_length: acceptLength(se),
      samples_per_epoch: samples,
      steps_per_epoch: batchesPerEpoch / accum,
    };
  };
  const microDone = (s: number): number => s * accum;
  const stateAt = (s: number): SharedState => {
    // Counters after a natural epoch end point at the next epoch, batch 0 (controller.py:755-761).
    const epoch = Math.floor(microDone(s) / batchesPerEpoch);
    const epochBatch = microDone(s) % batchesPerEpoch;
    return {
      global_step: s,
      epoch,
      epoch_batch: epochBatch,
      epoch_samples: epochBatch * batch,
      strategy: String(t.strategy),
      run_id: runId,
      world_size: world,
      contract: Object.fromEntries(contract),
      draft_config: draftConfig,
      aerie_sim: record(carried + s - step0),
    };
  };
  const save = async (s: number): Promise<void> => {
    await saveCheckpoint(out, stateAt(s), Number(t.max_checkpoints), {
      warn: (msg) => io.err(`${msg}\n`),
      between: (what) => {
        if (crashInSave === s && what === killAt && claimFault(faults)) process.exit(137);
      },
      peersFirst: crashInSave === s && killAt === 'peers-written' && !(faults.oncePath && existsSync(faults.oncePath)),
    });
    lastSaved = s;
  };

  const started = Date.now();
  let windowStart = Date.now();
  let windowSteps = 0;
  const meter = (n: number): string =>
    `\r${formatMeter({ desc: 'Training', n, total: maxSteps ?? totalSteps, elapsedS: (Date.now() - started) / 1000 })}`
      .replace('it/s]', 'step/s]')
      .replace('s/it]', 's/step]');
  if (tty && step < stopAt) io.err(meter(step));
  let ranThisLaunch = 0;
  while (step < stopAt) {
    step++;
    if (faults.oom && ranThisLaunch === 0 && claimFault(faults)) return fail(`\n${oomText()}`);
    if (faults.crashAtStep === step && claimFault(faults)) return fail(`\n${crashText()}`);
    await sleep(STEP_S * scale * 1000);
    ranThisLaunch++;
    windowSteps++;
    if (step % Math.max(1, Number(t.log_interval)) === 0) {
      const { loss, acc } = stepMetrics(record(carried + step - step0).trained_sample_epochs, step);
      const elapsed = Math.max((Date.now() - windowStart) / 1000, 1e-12);
      const metrics = eagle3Metrics(
        {
          loss0: loss,
          acc0: acc,
          ttt: Number(t.ttt_length),
          gradNorm: 0.5 + loss / 4,
          lr: scheduledLr(Number(t.learning_rate), step, totalSteps, Number(t.warmup_ratio)),
          perf: {
            stepsPerHour: (windowSteps * 3600) / elapsed,
            stepTimeS: elapsed / windowSteps,
            dataWaitS: 0,
            computeS: elapsed / windowSteps,
            samplesPerS: (windowSteps * accum * batch * dp) / elapsed,
          },
        },
        tracked,
      );
      // Every rank prints (the logger is not rank-gated, controller.py:682,721; assembly.py:291).
      // print() writes the text and its newline separately; unbuffered ranks (PYTHONUNBUFFERED)
      // race. AERIE_SIM_SPECFORGE_PRINT_RACE=1 shows the worst legal order, texts run together,
      // on every other log line.
      const texts = Array.from({ length: world }, () => pyDictLine(step, metrics));
      const runTogether =
        world > 1 &&
        io.env.AERIE_SIM_SPECFORGE_PRINT_RACE === '1' &&
        (step / Math.max(1, Number(t.log_interval))) % 2 === 1;
      io.out(runTogether ? `${texts.join('')}${'\n'.repeat(world)}` : texts.map((x) => `${x}\n`).join(''));
      windowStart = Date.now();
      windowSteps = 0;
    }
    if (Number(t.save_interval) > 0 && step % Number(t.save_interval) === 0) await save(step); // controller.py:739-746
    if (tty) io.err(meter(step));
  }
  if (tty && ranThisLaunch > 0) io.err('\n');
  // The final save, unless that step was just saved or loaded (trainer.py:528-529).
  if (step > 0 && lastSaved !== step) await save(step);
  return 0;
}
