/**
 * Drafter training: one long activity that launches the trainer detached, follows its log
 * into heartbeats, re-attaches after a worker crash (never a second trainer), relaunches
 * from the latest checkpoint aerie found itself after a trainer crash, and verifies the
 * drafter before the stage counts as done.
 */
import { Context } from '@temporalio/activity';
import type { Host, ProcRecord } from '../hosts/host.js';
import {
  classifyTrainFailure,
  latestCheckpoint,
  parseSafetensorsHeader,
  parseTrainProgress,
  renderTrainArgv,
  verifyDrafter,
  type TrainProgress,
} from '../stages/train.js';
import { lastLines } from '../sglang/log-phase.js';
import { cancelRequested, expandEnv, fatal, runPaths, transient, type ActivityDeps, type RunRef } from './context.js';
import { sleep } from './server.js';

export interface TrainOutcome {
  drafterDir: string;
  epoch?: number;
  step?: number;
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

      for (;;) {
        const latest = await latestTrainLaunch(host, prefix);
        let record = latest?.record;
        let state = record ? (await host.procStatus(record)).state : 'none';
        if (latest && record && state !== 'alive') {
          const status = await host.procStatus(record);
          if (status.state === 'exited' && status.code === 0) return await verifyOutput(host, outputDir, latest.gen + 1);
          // The trainer crashed (or vanished): decide from its log whether another launch can help.
          const tail = lastLines((await host.tailFrom(record.logPath, 0)).data, 50);
          const failure = classifyTrainFailure(tail);
          const code = status.state === 'exited' ? `exit code ${status.code}` : 'process gone';
          if (!failure.retryable) throw fatal(failure.kind === 'oom' ? 'OutOfMemoryError' : 'MissingDependencyError', `trainer failed (${code}): ${failure.advice}`, { logTail: tail });
          if (latest.gen >= t['crash-retries']) {
            throw fatal('TrainerCrashed', `trainer crashed ${latest.gen + 1} times (${code}); giving up after stages.train.crash-retries=${t['crash-retries']}`, { logTail: tail });
          }
        }
        if (!record || state !== 'alive') {
          const gen = latest ? latest.gen + 1 : 0;
          const checkpoint = latestCheckpoint((await host.list(outputDir)).filter((e) => e.isDirectory).map((e) => e.path.split('/').pop()!));
          const argv = renderTrainArgv({
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
            resumeFrom: checkpoint ? `${outputDir}/${checkpoint.dir}` : undefined,
            extraArgs: t['extra-args'],
          });
          const spawned = await host.spawnDetached(`${prefix}${gen}`, argv, { env: expandEnv(t.env), cwd: dir, logPath: `${dir}/train-${gen}.log` });
          record = spawned.record;
          state = 'alive';
        }
        await follow(host, record, ctx);
      }
    },
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
    ctx.heartbeat({ launchId: record.launchId, pid: record.pid, ...progress });
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

async function latestTrainLaunch(host: Host, prefix: string): Promise<{ gen: number; record: ProcRecord } | null> {
  let best: { gen: number; record: ProcRecord } | null = null;
  for (const r of await host.listLaunches()) {
    if (!r.launchId.startsWith(prefix)) continue;
    const gen = Number(r.launchId.slice(prefix.length));
    if (Number.isInteger(gen) && (!best || gen > best.gen)) best = { gen, record: r };
  }
  return best;
}

async function verifyOutput(host: Host, outputDir: string, launches: number): Promise<TrainOutcome> {
  const ckpt = latestCheckpoint((await host.list(outputDir)).filter((e) => e.isDirectory).map((e) => e.path.split('/').pop()!));
  if (!ckpt) throw transient('TrainerOutputMissing', `the trainer exited 0 but left no checkpoint in ${outputDir}`);
  const drafterDir = `${outputDir}/${ckpt.dir}`;
  const config = JSON.parse((await host.readFile(`${drafterDir}/config.json`)).toString('utf8')) as unknown;
  const header = parseSafetensorsHeader(await readHead(host, `${drafterDir}/model.safetensors`));
  const problems = verifyDrafter(config, header.header);
  if (problems.length > 0) throw fatal('DrafterRejectedError', `the trained drafter in ${drafterDir} is not servable: ${problems.join('; ')}`);
  return {
    drafterDir,
    epoch: ckpt.epoch,
    step: ckpt.step,
    launches,
    outputs: [`${drafterDir}/config.json`, `${drafterDir}/model.safetensors`],
    note: `drafter ${ckpt.dir} verified${launches > 1 ? ` (${launches} launches, resumed from checkpoints)` : ''}`,
  };
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
