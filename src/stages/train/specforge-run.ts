/**
 * The current SpecForge CLI as job hooks (common/job-supervise.ts): `specforge train -c <config>`,
 * a relaunch with `training.resume_from=<newest complete checkpoint>` after a crash, and
 * `specforge export --to sglang` of the newest checkpoint once training exits 0. All host I/O,
 * no Temporal: the activity supplies heartbeats and maps JobFailure to the workflow's types.
 *
 * Resume is SpecForge's own (a6b6b023 restores step, epoch, data position, optimizer, RNG) and
 * works only at the world size the checkpoint was written at: each rank loads its own
 * training_state_rank{r}.pt (SpecForge@a6b6b023:specforge/training/checkpoint.py:298-318).
 * A relaunch at another size is refused by SpecForge every time, so that refusal ends the
 * stage with the reason instead of using up the crash budget.
 */
import type { Host } from '../../hosts/host.js';
import {
  classifyTrainFailure,
  JobFailure,
  superviseJob,
  type JobHooks,
  type SuperviseOptions,
  type TrainFailure,
} from '../common/index.js';
import { parseGenericProgress, type TrainProgress } from './progress.js';
import { parseSpecforgeProgress, specforgeStopStep } from './specforge-progress.js';
import {
  listSpecforgeCheckpoints,
  planSpecforgeResume,
  specforgeWorldSize,
  type SpecforgeResumePlan,
} from './specforge-checkpoints.js';
import { trainFailureType, verifiedDrafter, type TrainResult } from './run.js';
import {
  renderSpecforgeConfig,
  renderSpecforgeExportArgv,
  renderSpecforgeTrainArgv,
  specforgeConfig,
  type SpecforgeRun,
} from './specforge-config.js';

export type ExportJob = Omit<SuperviseOptions<TrainProgress>, 'prefix' | 'logPath' | 'what' | 'crashType'> & {
  prefix: string;
  logPath(gen: number): string;
};

// SpecForge@a6b6b023:specforge/training/checkpoint.py:313-318
const WORLD_SIZE_REFUSED =
  /has no usable per-rank state for rank \d+ at world_size=(\d+) \(written at world_size=(\w+)\)/;
// pydantic's ValidationError from Config.model_validate (SpecForge@a6b6b023:specforge/config/schema.py:934,963):
// the config is refused the same way on every launch.
const CONFIG_REFUSED =
  /pydantic_core\._pydantic_core\.ValidationError: \d+ validation errors? for Config|^ValueError: override (path )?'[^']*' /m;

/** classifyTrainFailure, plus the CLI's two refusals that a relaunch meets again. */
export function classifySpecforgeFailure(logTail: string): TrainFailure {
  const world = WORLD_SIZE_REFUSED.exec(logTail);
  if (world && world[1] === world[2]) {
    // Same world size: that rank's file is missing, a save cut short (checkpoint.py:300-301). The
    // same checkpoint would be refused again, so this is not worth a relaunch either.
    return {
      kind: 'usage',
      retryable: false,
      evidence: world[0],
      advice:
        `SpecForge was given a checkpoint that lacks a rank's training_state_rank<r>.pt (a save cut short): ${world[0]}. ` +
        "aerie resumes only from checkpoints holding every rank's file; if training.resume_from came from stages.train.overrides, point it at a complete <run_id>-step<N> or remove it",
    };
  }
  if (world) {
    return {
      kind: 'usage',
      retryable: false,
      evidence: world[0],
      advice:
        `SpecForge refuses to resume a checkpoint written at world_size=${world[2]} with world_size=${world[1]} (each rank needs its own optimizer/RNG shard). ` +
        `Fix: launch with the original number of processes again (stages.train.overrides deployment.trainer.nproc_per_node × nnodes = ${world[2]}), or remove the run's train/output and \`aerie retry --stage train\` to start over`,
    };
  }
  const config = CONFIG_REFUSED.exec(logTail);
  if (config) {
    return {
      kind: 'usage',
      retryable: false,
      evidence: config[0],
      advice:
        'SpecForge refused the config aerie wrote (see the log for the field). Fix the field in stages.train (or its overrides); `aerie plan` shows the file aerie writes',
    };
  }
  return classifyTrainFailure(logTail);
}

/** The world size the config aerie writes trains at: a resume must use the same. */
export function runWorldSize(run: SpecforgeRun): number {
  const deployment = specforgeConfig(run).deployment as
    { trainer?: { nnodes?: number; nproc_per_node?: number } } | undefined;
  return specforgeWorldSize(deployment?.trainer);
}

/**
 * What a relaunch does with the run's checkpoints (planSpecforgeResume): the newest
 * `<run>-step<N>` holding training_state.pt and every rank's training_state_rank{r}.pt,
 * since SpecForge writes them with no barrier between
 * (SpecForge@a6b6b023:specforge/training/checkpoint.py:89-106), unless they were written at
 * another world size.
 */
export async function resumePlan(host: Host, run: SpecforgeRun): Promise<SpecforgeResumePlan> {
  return planSpecforgeResume(await listSpecforgeCheckpoints(host, run.outputDir, run.runId), runWorldSize(run));
}

/** The world-size refusal, once, before a launch SpecForge would refuse (and whose saves would delete later steps). */
export function worldMismatchMessage(
  run: SpecforgeRun,
  plan: Extract<SpecforgeResumePlan, { kind: 'world-mismatch' }>,
): string {
  return (
    `specforge train cannot resume ${run.runId}: its checkpoints in ${run.outputDir} were written at world size ${plan.writtenAt} (${plan.evidence}), ` +
    `this launch trains at world size ${plan.worldSize}, and SpecForge resumes a checkpoint only at the world size that wrote it ` +
    '(each rank reloads its own training_state_rank<r>.pt, SpecForge@a6b6b023:specforge/training/checkpoint.py:298-319). ' +
    `aerie does not start over on its own: the new run's first save would delete every later checkpoint. Fix: set stages.train.overrides ` +
    `deployment.trainer.nproc_per_node (× nnodes) back to ${plan.writtenAt}, or remove ${run.outputDir} and \`aerie retry --stage train\` to start over`
  );
}

/** The newest checkpoint a relaunch at the run's world size can resume from, if any. */
export async function newestResumable(host: Host, run: SpecforgeRun): Promise<string | undefined> {
  const plan = await resumePlan(host, run);
  return plan.kind === 'resume' ? plan.checkpoint.dir : undefined;
}

/**
 * The step the run stops at, from the config aerie writes (overrides included) and the feature
 * files there: HEAD prints no total (its dict lines carry the step only), so heartbeats and
 * the UI get it from here.
 */
export function runStopStep(run: SpecforgeRun, samples: number): number {
  const t = (specforgeConfig(run).training ?? {}) as Record<string, unknown>;
  const num = (v: unknown, d: number): number => (typeof v === 'number' ? v : d);
  return specforgeStopStep({
    samples,
    worldSize: runWorldSize(run),
    batchSize: num(t.batch_size, 1),
    accumulationSteps: num(t.accumulation_steps, 1),
    numEpochs: num(t.num_epochs, 1),
    maxSteps: typeof t.max_steps === 'number' ? t.max_steps : undefined,
    tpSize: num(t.tp_size, 1),
    usp:
      t.attention_backend === 'usp' ? { ulysses: num(t.sp_ulysses_size, 1), ring: num(t.sp_ring_size, 1) } : undefined,
  });
}

/** Feature files SpecForge's offline reader will find (*.ckpt and *.ckpt.gz; offline_reader.py:44,72-82). */
async function countFeatureFiles(host: Host, dir: string): Promise<number | undefined> {
  const r = await host
    .exec(['sh', '-c', 'find "$1" -type f \\( -name "*.ckpt" -o -name "*.ckpt.gz" \\) | wc -l', 'sh', dir], {
      timeoutMs: 10 * 60_000,
    })
    .catch(() => null);
  const n = r && r.code === 0 ? Number(r.stdout.trim()) : NaN;
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

export function specforgeHooks(
  host: Host,
  run: SpecforgeRun,
  drafterDir: string,
  exportJob: ExportJob,
): JobHooks<TrainResult, TrainProgress> {
  let totalSteps: number | undefined;
  const writeConfig = async (): Promise<void> => {
    await host.mkdirp(run.outputDir);
    await host.writeFileAtomic(run.configPath, renderSpecforgeConfig(run));
    if (totalSteps === undefined && run.hiddenStatesPath) {
      const files = await countFeatureFiles(host, run.hiddenStatesPath);
      if (files !== undefined) totalSteps = runStopStep(run, files);
    }
  };
  const exportNewest = async (ckpt: string): Promise<TrainResult> => {
    // Training checkpoints are not servable: export the newest one, as its own followed job.
    const argv = renderSpecforgeExportArgv(run, ckpt, drafterDir);
    const { result } = await superviseJob<TrainResult, TrainProgress>(
      { ...exportJob, what: 'specforge export', crashType: 'ExportFailed', crashRetries: 1 },
      {
        fresh: async () => ({ kind: 'launch', argv, prepare: () => host.mkdirp(drafterDir) }),
        afterSuccess: async () => ({ kind: 'done', result: await verifiedDrafter(host, drafterDir) }),
        afterCrash: async () => ({ kind: 'launch', argv }),
        classify: classifySpecforgeFailure,
        failureType: () => 'ExportFailed',
        parse: (chunk, prev) => parseGenericProgress(chunk, prev),
      },
    );
    return result;
  };
  return {
    fresh: async () => ({ kind: 'launch', argv: renderSpecforgeTrainArgv(run), prepare: writeConfig }),
    async afterSuccess(ended) {
      // SpecForge@a6b6b023 saves a final checkpoint when training ends, so a clean exit leaves one.
      const ckpt = await newestResumable(host, run);
      if (!ckpt) {
        throw new JobFailure(
          'TrainerOutputMissing',
          `specforge train exited 0 but left no complete ${run.runId}-step<N> checkpoint in ${run.outputDir}; see ${ended.record.logPath}`,
          ended.logTail,
        );
      }
      return { kind: 'done', result: await exportNewest(ckpt) };
    },
    async afterCrash(ended) {
      const plan = await resumePlan(host, run);
      if (plan.kind === 'world-mismatch')
        throw new JobFailure('TrainerFailed', worldMismatchMessage(run, plan), ended.logTail);
      const ckpt = plan.kind === 'resume' ? plan.checkpoint.dir : undefined;
      const skipped = plan.skipped.length ? ` (not ${plan.skipped.join('; ')})` : '';
      return {
        kind: 'launch',
        argv: renderSpecforgeTrainArgv(run, ckpt),
        prepare: writeConfig,
        note: `${ckpt ? `resuming from ${ckpt}` : 'no complete checkpoint yet: starting over'}${skipped}`,
      };
    },
    classify: classifySpecforgeFailure,
    failureType: trainFailureType,
    parse: (chunk, prev) => {
      const p = parseSpecforgeProgress(chunk, prev);
      if (totalSteps !== undefined) p.totalSteps ??= totalSteps;
      return p;
    },
  };
}
