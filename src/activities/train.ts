/**
 * Drafter training: one long activity that launches the trainer detached, follows its log
 * into heartbeats, re-attaches after a worker crash (never a second trainer), relaunches
 * from the latest checkpoint aerie found itself after a trainer crash, and verifies the
 * drafter before the stage counts as done. The drivers (SpecForge v0.2, the current specforge
 * CLI, a command template) are job hooks in src/stages/train/run.ts.
 */
import { withRunGpus } from '../config/gpus.js';
import { Context } from '@temporalio/activity';
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import {
  JobFailure,
  superviseJob,
  type JobHooks,
  SPECFORGE_PROFILES,
  type SpecforgeProfileId,
} from '../stages/common/index.js';
import {
  TrainLaunchError,
  commandHooks,
  v02Hooks,
  type TrainResult,
  specforgeHooks,
  listSpecforgeCheckpoints,
} from '../stages/train/index.js';
import { trainSpec, type HiddenStates } from '../stages/launch-specs.js';
import type { TrainProgress } from '../stages/train/index.js';
import {
  cancelRequested,
  expandEnv,
  fatal,
  keepHeartbeating,
  runPaths,
  type ActivityDeps,
  type RunRef,
} from './context.js';

export type { HiddenStates } from '../stages/launch-specs.js';

export interface TrainOutcome {
  drafterDir: string;
  launches: number;
  /** The argv of the last trainer launch, as run. */
  argv: string[];
  outputs: string[];
  note: string;
}

const FOLLOW_MS = 2000;
/** How often the CLI driver's checkpoint directory is looked at for the heartbeat. */
const CHECKPOINT_LOOK_MS = 20_000;

/** The trainer's hooks and where its files go, from the config. */
export function trainPlan(
  config: Config,
  host: Host,
  runId: string,
  dataPath: string,
  hidden: HiddenStates | undefined,
  specforge: SpecforgeProfileId | undefined,
  job: { heartbeat(details: unknown): void; signal?: AbortSignal; stopJob?: () => boolean },
) {
  const t = config.stages.train;
  const paths = runPaths(host, runId);
  const dir = paths.train;
  const outputDir = `${dir}/output`;
  const prefix = `${runId}.train.`;
  const spec = trainSpec(config, paths, dataPath, hidden, specforge ? SPECFORGE_PROFILES[specforge] : undefined);
  let hooks: JobHooks<TrainResult, TrainProgress>;
  // HEAD's log names no checkpoint: where one is, the UI reads from its `-latest` link.
  let latestCheckpoint: (() => Promise<string | undefined>) | undefined;
  switch (spec.driver) {
    case 'specforge-v0.2':
      hooks = v02Hooks(host, spec.launch, prefix);
      break;
    case 'specforge':
      hooks = specforgeHooks(host, spec.run, spec.drafterDir, {
        host,
        prefix: `${runId}.train-export.`,
        logPath: (gen) => `${dir}/export-${gen}.log`,
        cwd: dir,
        env: expandEnv(withRunGpus(config, t.env)),
        crashRetries: 1,
        pollMs: FOLLOW_MS,
        signal: job.signal,
        stopJob: job.stopJob,
        heartbeat: (d) => job.heartbeat({ phase: 'export', launchId: d.launchId, pid: d.pid, argv: d.argv }),
      });
      latestCheckpoint = async () =>
        (await listSpecforgeCheckpoints(host, spec.run.outputDir, spec.run.runId)).latest?.dir;
      break;
    case 'command':
      hooks = commandHooks(host, spec.template, spec.values);
      break;
  }
  return { dir, outputDir, prefix, hooks, latestCheckpoint };
}

export function trainActivities({ hosts }: ActivityDeps) {
  return {
    async trainDrafter(
      input: RunRef & { dataPath: string; hidden?: HiddenStates; specforge?: SpecforgeProfileId },
    ): Promise<TrainOutcome> {
      const { config, runId } = input;
      const t = config.stages.train;
      const host = hosts.get(config);
      const ctx = Context.current();
      // Checkpoint checks and the export run between log polls: a timer keeps the heartbeat going.
      let details: unknown = { phase: 'starting', driver: t.driver };
      const stopBeat = keepHeartbeating(() => details);
      try {
        let lastCheckpoint: string | undefined;
        let lookedAt = 0;
        const heartbeat = (d: {
          launchId: string;
          pid: number;
          argv: string[];
          progress: TrainProgress | undefined;
          note?: string;
        }) => {
          const { partial: _raw, ...progress } = d.progress ?? { lines: 0 }; // raw log text does not belong in a heartbeat
          if (latestCheckpoint && Date.now() - lookedAt > CHECKPOINT_LOOK_MS) {
            lookedAt = Date.now();
            latestCheckpoint().then(
              (c) => (lastCheckpoint = c),
              () => undefined,
            );
          }
          details = {
            launchId: d.launchId,
            pid: d.pid,
            driver: t.driver,
            argv: d.argv,
            ...progress,
            ...(lastCheckpoint && !progress.lastCheckpoint ? { lastCheckpoint } : {}),
            ...(d.note ? { note: d.note } : {}),
          };
        };
        const { dir, outputDir, prefix, hooks, latestCheckpoint } = trainPlan(
          config,
          host,
          runId,
          input.dataPath,
          input.hidden,
          input.specforge,
          {
            heartbeat: (d) => (details = d),
            signal: ctx.cancellationSignal,
            stopJob: cancelRequested,
          },
        );
        await host.mkdirp(outputDir);
        const { result, launches, argv } = await superviseJob<TrainResult, TrainProgress>(
          {
            host,
            prefix,
            logPath: (gen) => `${dir}/train-${gen}.log`,
            cwd: dir,
            env: expandEnv(withRunGpus(config, t.env)),
            crashRetries: t['crash-retries'],
            pollMs: FOLLOW_MS,
            signal: ctx.cancellationSignal,
            stopJob: cancelRequested,
            heartbeat,
            what: 'trainer',
            crashType: 'TrainerCrashed',
          },
          hooks,
        );
        return {
          drafterDir: result.drafterDir,
          launches,
          argv,
          outputs: [`${result.drafterDir}/config.json`, `${result.drafterDir}/model.safetensors`],
          note: `${t.driver}: drafter verified (${result.drafterDir.split('/').slice(-2).join('/')})${launches > 1 ? ` (${launches} launches, continued from checkpoints)` : ''}${result.note ? `; ${result.note}` : ''}`,
        };
      } catch (err) {
        if (err instanceof TrainLaunchError) throw fatal('ConfigError', err.message);
        if (err instanceof JobFailure)
          throw fatal(err.type, err.message, err.logTail ? { logTail: err.logTail } : undefined);
        throw err;
      } finally {
        stopBeat();
      }
    },
  };
}
