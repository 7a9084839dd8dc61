/**
 * Drafter training: one long activity that launches the trainer detached, follows its log
 * into heartbeats, re-attaches after a worker crash (never a second trainer), relaunches
 * from the latest checkpoint aerie found itself after a trainer crash, and verifies the
 * drafter before the stage counts as done.
 */
import { Context } from '@temporalio/activity';
import type { Host, ProcRecord } from '../hosts/host.js';
import { basename } from 'node:path';
import {
  classifyTrainFailure,
  parseSafetensorsHeader,
  parseTrainProgress,
  planTrainResume,
  rankCheckpoints,
  renderTrainArgv,
  resumeSegmentDir,
  segmentBases,
  TrainLaunchError,
  verifyDrafter,
  type ResumePlan,
  type SegmentListing,
  type TrainLaunch,
  type TrainProgress,
} from '../stages/train.js';
import { lastLines } from '../sglang/log-phase.js';
import { cancelRequested, expandEnv, fatal, runPaths, transient, type ActivityDeps, type RunRef } from './context.js';
import { latestLaunch, sleep } from './server.js';

export interface TrainOutcome {
  drafterDir: string;
  launches: number;
  outputs: string[];
  note: string;
}

const FOLLOW_MS = 2000;

export function trainActivities({ hosts }: ActivityDeps) {
  return {
    async trainDrafter(input: RunRef & { dataPath: string; hiddenStatesDir?: string }): Promise<TrainOutcome> {
      const { config, runId } = input;
      const t = config.stages.train;
      const host = hosts.get(config);
      const dir = runPaths(host, runId).train;
      const outputDir = `${dir}/output`;
      const prefix = `${runId}.train.`;
      const ctx = Context.current();
      await host.mkdirp(outputDir);
      const original: TrainLaunch = {
        launcher: t.launcher,
        targetModelPath: config.target['model-path'],
        draftModelConfig: t['draft-model-config'],
        trainDataPath: input.dataPath,
        hiddenStatesPath: input.hiddenStatesDir,
        outputDir,
        chatTemplate: t['chat-template'],
        maxLength: t['max-length'],
        numEpochs: t['num-epochs'],
        batchSize: t['batch-size'],
        learningRate: t['learning-rate'],
        tttLength: t['ttt-length'],
        tpSize: t['tp-size'],
        saveInterval: t['save-interval'],
        extraArgs: t['extra-args'],
      };

      for (;;) {
        const latest = await latestLaunch(host, prefix);
        const status = latest ? await host.procStatus(latest.record) : undefined;
        if (latest && status?.state === 'alive') {
          // A worker crash left the trainer running: follow it, never start a second one.
          await follow(host, latest.record, ctx);
          continue;
        }
        let plan: ResumePlan;
        if (!latest) plan = { kind: 'fresh', launch: original };
        else {
          plan = await planFromCheckpoints(host, original, prefix);
          if (status?.state === 'exited' && status.code === 0) {
            if (plan.kind === 'done') return await verified(host, plan.finalCheckpoint.dir, latest.gen + 1);
            throw fatal('TrainerOutputMissing', `the trainer exited 0 but its checkpoints do not cover the planned steps (${describePlan(plan)}); see ${latest.record.logPath}`);
          }
          // The trainer crashed (or vanished): decide from its log whether another launch can help.
          const tail = lastLines((await host.tailFrom(latest.record.logPath, 0)).data, 50);
          const failure = classifyTrainFailure(tail);
          const code = status?.state === 'exited' ? `exit code ${status.code}` : 'process gone';
          if (!failure.retryable) {
            throw fatal(failure.kind === 'oom' ? 'OutOfMemoryError' : failure.kind === 'missing-module' ? 'MissingDependencyError' : 'TrainerFailed', `trainer failed (${code}): ${failure.advice}`, { logTail: tail });
          }
          if (latest.gen >= t['crash-retries']) {
            throw fatal('TrainerCrashed', `trainer crashed ${latest.gen + 1} times (${code}); giving up after stages.train.crash-retries=${t['crash-retries']}`, { logTail: tail });
          }
          if (plan.kind === 'done') return await verified(host, plan.finalCheckpoint.dir, latest.gen + 1);
        }
        const gen = latest ? latest.gen + 1 : 0;
        let argv: string[];
        try {
          argv = renderTrainArgv(plan.launch);
        } catch (err) {
          if (err instanceof TrainLaunchError) throw fatal('ConfigError', err.message);
          throw err;
        }
        await host.mkdirp(plan.launch.outputDir);
        const spawned = await host.spawnDetached(`${prefix}${gen}`, argv, { env: expandEnv(t.env), cwd: dir, logPath: `${dir}/train-${gen}.log` });
        await follow(host, spawned.record, ctx);
      }
    },
  };
}

/** Where to go from the checkpoints on disk: steps per epoch come from the first launch's log. */
async function planFromCheckpoints(host: Host, original: TrainLaunch, prefix: string): Promise<ResumePlan> {
  const first = await host.findLaunch(`${prefix}0`);
  const stepsPerEpoch = first ? parseTrainProgress((await host.tailFrom(first.logPath, 0, 4 << 20)).data).stepsPerEpoch : undefined;
  const top = (await host.list(original.outputDir)).filter((e) => e.isDirectory).map((e) => basename(e.path));
  const segments: SegmentListing[] = [{ dir: original.outputDir, baseStep: 0, entries: top }];
  for (const base of segmentBases(top)) {
    const segDir = resumeSegmentDir(original.outputDir, base);
    segments.push({ dir: segDir, baseStep: base, entries: (await host.list(segDir)).filter((e) => e.isDirectory).map((e) => basename(e.path)) });
  }
  for (const ckpt of rankCheckpoints(segments)) {
    if ((await drafterProblems(host, ckpt.dir)).length > 0) continue; // a damaged checkpoint: try an older one
    // Without the trainer's own steps-per-epoch figure a continuation cannot be sized: start over.
    return stepsPerEpoch ? planTrainResume(original, ckpt, stepsPerEpoch) : { kind: 'fresh', launch: original };
  }
  return { kind: 'fresh', launch: original };
}

function describePlan(plan: ResumePlan): string {
  return plan.kind === 'continue' ? `${plan.stepsOwed} steps still owed after ${plan.from.dir}` : plan.kind;
}

async function drafterProblems(host: Host, drafterDir: string): Promise<string[]> {
  try {
    const config = JSON.parse((await host.readFile(`${drafterDir}/config.json`)).toString('utf8')) as unknown;
    const header = parseSafetensorsHeader(await readHead(host, `${drafterDir}/model.safetensors`));
    return verifyDrafter(config, header.header);
  } catch (err) {
    return [(err as Error).message];
  }
}

async function verified(host: Host, drafterDir: string, launches: number): Promise<TrainOutcome> {
  const problems = await drafterProblems(host, drafterDir);
  if (problems.length > 0) throw fatal('DrafterRejectedError', `the trained drafter in ${drafterDir} is not servable: ${problems.join('; ')}`);
  return {
    drafterDir,
    launches,
    outputs: [`${drafterDir}/config.json`, `${drafterDir}/model.safetensors`],
    note: `drafter ${basename(drafterDir)} verified${launches > 1 ? ` (${launches} launches, continued from checkpoints)` : ''}`,
  };
}

/** Follow a live trainer until it exits; heartbeats carry its progress. */
async function follow(host: Host, record: ProcRecord, ctx: Context): Promise<void> {
  let offset = 0;
  let progress: TrainProgress = { lines: 0 };
  for (;;) {
    const chunk = await host.tailFrom(record.logPath, offset);
    offset = chunk.offset;
    progress = parseTrainProgress(chunk.data, progress);
    const { partial: _raw, ...small } = progress; // raw log text does not belong in a heartbeat
    ctx.heartbeat({ launchId: record.launchId, pid: record.pid, ...small });
    if ((await host.procStatus(record)).state !== 'alive') return;
    try {
      await sleep(FOLLOW_MS, ctx.cancellationSignal);
    } catch (err) {
      // A cancel request stops the job; a worker shutdown leaves it running for the next attempt.
      if (cancelRequested()) await host.killGroup(record, { graceMs: 15_000 });
      throw err;
    }
  }
}

/** The safetensors header without reading gigabytes of weights through the host. */
async function readHead(host: Host, path: string): Promise<Buffer> {
  const read = async (n: number) => {
    const r = await host.exec(['sh', '-c', 'head -c "$1" -- "$2" | base64 | tr -d "\\n"', 'sh', String(n), path]);
    if (r.code !== 0) throw transient('TrainerOutputMissing', `cannot read ${path}: ${r.stderr.trim()}`);
    return Buffer.from(r.stdout, 'base64');
  };
  const first = await read(8);
  if (first.length < 8) throw fatal('DrafterRejectedError', `${path} is too short to be a safetensors file`);
  const len = Number(first.readBigUInt64LE(0));
  if (len > 100 * 2 ** 20) throw fatal('DrafterRejectedError', `${path} has an implausible header length ${len}`);
  return read(8 + len);
}
