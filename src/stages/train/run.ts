/**
 * The three trainer drivers as job hooks (common/job-supervise.ts): what the first launch is, what
 * follows a clean exit and a crash, and how the log reads. All host I/O, no Temporal: the
 * activity supplies heartbeats and maps JobFailure to the workflow's failure types.
 *
 *   specforge-v0.2  relaunch = --resume into the same output dir where it works (961ca7c3…), else
 *                   --ckpt-dir <newest checkpoint> + --max-num-steps <owed> into resume_step_<N>;
 *                   before 03a3dedb (no final save) a clean exit keeps the newest checkpoint and
 *                   says which steps it lacks (v02-checkpoints.ts)
 *   specforge       (specforge-run.ts) relaunch = training.resume_from=<newest complete <run>-step<N>>;
 *                   done = `specforge export --to sglang`
 *   command         relaunch = the template + resume-args with {checkpoint} (when checkpoint-pattern is set)
 *
 * A drafter is done only once it verifies (drafter.ts): architectures, draft vocab,
 * fc/lm_head/d2t/midlayer names and shapes, and a weights file with data behind its header.
 */
import { basename } from 'node:path';
import type { FatalType } from '../../failures.js';
import type { Host } from '../../hosts/host.js';
import {
  classifyTrainFailure,
  JobFailure,
  type Ended,
  type JobHooks,
  type NextStep,
  type TrainFailure,
} from '../common/index.js';
import { parseGenericProgress, parseTrainProgress, seedProgress, type TrainProgress } from './progress.js';
import {
  planTrainResume,
  quarantineDir,
  RESUME_LINK,
  rankCheckpoints,
  resumeSegmentDir,
  segmentBases,
  type ResumePlan,
  type SegmentListing,
} from './v02-checkpoints.js';
import { parseSafetensorsHeader, verifyDrafter } from './drafter.js';
import { profileOf, type TrainLaunch } from './launch.js';
import { renderTrainArgv } from './v02-argv.js';
import {
  commandCheckpoints,
  commandDrafterDir,
  renderCommandArgv,
  type CommandTemplate,
  type CommandValues,
} from './command.js';

export interface TrainResult {
  drafterDir: string;
  /** What the researcher should know about how the drafter came to be (steps not saved, checkpoints skipped). */
  note?: string;
}

export function trainFailureType(f: TrainFailure): FatalType {
  if (f.kind === 'oom') return 'OutOfMemoryError';
  if (f.kind === 'missing-module') return 'MissingDependencyError';
  return 'TrainerFailed';
}

/** The safetensors header without reading gigabytes of weights through the host. */
async function readHead(host: Host, path: string): Promise<Buffer> {
  const read = async (n: number): Promise<Buffer> => {
    const r = await host.exec(['sh', '-c', 'head -c "$1" -- "$2" | base64 | tr -d "\\n"', 'sh', String(n), path]);
    if (r.code !== 0) throw new Error(`cannot read ${path}: ${r.stderr.trim()}`);
    return Buffer.from(r.stdout, 'base64');
  };
  const first = await read(8);
  if (first.length < 8) throw new Error(`${path} is too short to be a safetensors file`);
  const len = Number(first.readBigUInt64LE(0));
  if (len > 100 * 2 ** 20) throw new Error(`${path} has an implausible header length ${len}`);
  return read(8 + len);
}

/** Why SGLang could not serve the drafter in dir (empty when it can). */
export async function drafterProblems(host: Host, dir: string): Promise<string[]> {
  try {
    const config = JSON.parse((await host.readFile(`${dir}/config.json`)).toString('utf8')) as unknown;
    const weights = `${dir}/model.safetensors`;
    const head = parseSafetensorsHeader(await readHead(host, weights));
    const problems = verifyDrafter(config, head.header);
    // A save cut short (v0.2 writes in place, SpecForge@20e2e3f0:scripts/train_eagle3.py:699-727) keeps its whole header.
    const dataEnd = Math.max(
      0,
      ...Object.entries(head.header)
        .filter(([k]) => k !== '__metadata__')
        .map(([, v]) => (v as { data_offsets: [number, number] }).data_offsets[1]),
    );
    const st = await host.stat(weights);
    if (!st || st.size <= 8 + head.headerLength) problems.push(`${weights} holds a header and no tensor data`);
    else if (st.size < 8 + head.headerLength + dataEnd)
      problems.push(
        `${weights} is cut short: ${st.size} bytes of the ${8 + head.headerLength + dataEnd} its header promises`,
      );
    return problems;
  } catch (err) {
    return [(err as Error).message];
  }
}

export async function verifiedDrafter(host: Host, dir: string): Promise<TrainResult> {
  const problems = await drafterProblems(host, dir);
  if (problems.length > 0)
    throw new JobFailure(
      'DrafterRejectedError',
      `the trained drafter in ${dir} is not servable: ${problems.join('; ')}`,
    );
  return { drafterDir: dir };
}

const dirNames = async (host: Host, dir: string): Promise<string[]> =>
  (await host.stat(dir))?.isDirectory
    ? (await host.list(dir)).filter((e) => e.isDirectory).map((e) => basename(e.path))
    : [];

// ---- SpecForge v0.2 ------------------------------------------------------------------

/** Why `dir` cannot be resumed from (empty when it can): a servable drafter plus its training state. */
async function checkpointProblems(host: Host, dir: string): Promise<string[]> {
  const problems = await drafterProblems(host, dir);
  // Rank 0 writes training_state.pt before save_pretrained, and v0.2 writes no per-rank files
  // (SpecForge@20e2e3f0:scripts/train_eagle3.py:714-726); --resume reads it (…:540-547).
  const st = await host.stat(`${dir}/training_state.pt`);
  if (!st || st.size === 0) problems.push(`${dir}/training_state.pt is missing or empty`);
  return problems;
}

/**
 * Where to go from v0.2's checkpoints on disk; steps per epoch come from the first launch's
 * log. A damaged checkpoint is skipped; where --resume would pick it (the output dir's own,
 * on a revision where --resume works) it is renamed out of the pattern --resume matches first.
 */
async function planV02(
  host: Host,
  original: TrainLaunch,
  firstLog: string | undefined,
  cleanExit: boolean,
): Promise<{ plan: ResumePlan; notes: string[] }> {
  const profile = profileOf(original);
  const stepsPerEpoch = firstLog
    ? parseTrainProgress((await host.tailFrom(firstLog, 0, 4 << 20)).data).stepsPerEpoch
    : undefined;
  const top = await dirNames(host, original.outputDir);
  const segments: SegmentListing[] = [{ dir: original.outputDir, baseStep: 0, entries: top }];
  for (const base of segmentBases(top)) {
    const segDir = resumeSegmentDir(original.outputDir, base);
    segments.push({ dir: segDir, baseStep: base, entries: await dirNames(host, segDir) });
  }
  const notes: string[] = [];
  for (const ckpt of rankCheckpoints(segments)) {
    const problems = await checkpointProblems(host, ckpt.dir);
    if (problems.length === 0) return { plan: planTrainResume(original, ckpt, stepsPerEpoch, cleanExit), notes };
    if (profile.v02ResumeWorks && ckpt.baseStep === 0) {
      const aside = quarantineDir(ckpt.dir);
      await host.rename(ckpt.dir, aside);
      notes.push(`moved damaged checkpoint ${ckpt.dir} to ${aside} (${problems[0]}) so --resume does not load it`);
    } else notes.push(`skipped damaged checkpoint ${ckpt.dir} (${problems[0]})`);
  }
  return { plan: planTrainResume(original, null, stepsPerEpoch, cleanExit), notes };
}

export function v02Hooks(host: Host, original: TrainLaunch, prefix: string): JobHooks<TrainResult, TrainProgress> {
  // Each launch's progress starts from what its argv says; a continuation reports run-wide steps.
  let seed = seedProgress(original);
  const launchOf = (plan: Extract<ResumePlan, { launch: TrainLaunch }>, notes: string[] = []) => {
    const argv = renderTrainArgv(plan.launch);
    const base = plan.kind === 'continue' ? plan.from.totalStep : 0;
    const what =
      plan.kind === 'resume'
        ? `resuming with --resume from ${plan.from.dir}${Number.isNaN(plan.stepsOwed) ? '' : ` (${plan.stepsOwed} steps owed)`}`
        : plan.kind === 'continue'
          ? `continuing from ${plan.from.dir} (${plan.stepsOwed} steps owed${plan.launch.resumeLink ? `, loaded through ${plan.launch.outputDir}/${RESUME_LINK} and --resume` : ''})`
          : plan.note;
    const note = [...notes, ...(what ? [what] : [])].join('; ') || undefined;
    return {
      kind: 'launch' as const,
      argv,
      note,
      prepare: async () => {
        seed = seedProgress(plan.launch, base);
        await host.mkdirp(plan.launch.outputDir);
        const link = plan.launch.resumeLink;
        if (link) {
          const r = await host.exec(['ln', '-sfn', link, `${plan.launch.outputDir}/${RESUME_LINK}`]);
          if (r.code !== 0)
            throw new Error(`cannot link ${plan.launch.outputDir}/${RESUME_LINK} to ${link}: ${r.stderr.trim()}`);
        }
      },
    };
  };
  const firstLog = async () => (await host.findLaunch(`${prefix}0`))?.logPath;
  /** The trainer ended its run (exit 0, or a failure after training): its checkpoints say what it left. */
  const finished = async (ended: Ended, how?: string): Promise<NextStep<TrainResult>> => {
    const { plan, notes } = await planV02(host, original, await firstLog(), true);
    if (how) notes.unshift(how);
    if (plan.kind === 'done') {
      const note = [...notes, ...(plan.note ? [plan.note] : [])].join('; ');
      return {
        kind: 'done',
        result: { ...(await verifiedDrafter(host, plan.finalCheckpoint.dir)), ...(note ? { note } : {}) },
      };
    }
    if (plan.kind !== 'short') return launchOf(plan, notes);
    const owed = Number.isNaN(plan.stepsOwed)
      ? 'it never reported its steps per epoch'
      : `${plan.stepsOwed} steps still owed after ${plan.from?.dir ?? 'no usable checkpoint'}`;
    throw new JobFailure(
      'TrainerOutputMissing',
      `the trainer ${how ? 'finished' : 'exited 0'} but its checkpoints do not cover the planned steps (${owed}${notes.length ? `; ${notes.join('; ')}` : ''}); see ${ended.record.logPath}`,
      ended.logTail,
    );
  };
  return {
    fresh: async () => launchOf({ kind: 'fresh', launch: original }),
    afterSuccess: (ended) => finished(ended),
    async afterCrash(ended, failure) {
      if (failure.kind === 'teardown') return finished(ended, failure.advice);
      const { plan, notes } = await planV02(host, original, await firstLog(), false);
      if (plan.kind === 'done') return { kind: 'done', result: await verifiedDrafter(host, plan.finalCheckpoint.dir) };
      if (plan.kind === 'short') throw new Error('planTrainResume: a crash never plans short');
      return launchOf(plan, notes);
    },
    classify: classifyTrainFailure,
    failureType: trainFailureType,
    parse: (chunk, prev) => parseTrainProgress(chunk, prev ?? seed),
  };
}

// ---- generic command ------------------------------------------------------------------

export function commandHooks(
  host: Host,
  t: CommandTemplate,
  values: CommandValues,
): JobHooks<TrainResult, TrainProgress> {
  const drafterDir = commandDrafterDir(t, values);
  const prepare = () => host.mkdirp(values.output_dir);
  return {
    fresh: async () => ({ kind: 'launch', argv: renderCommandArgv(t, values), prepare }),
    afterSuccess: async () => ({ kind: 'done', result: await verifiedDrafter(host, drafterDir) }),
    async afterCrash() {
      for (const c of commandCheckpoints(
        values.output_dir,
        t.checkpointPattern,
        await dirNames(host, values.output_dir),
      )) {
        return {
          kind: 'launch',
          argv: renderCommandArgv(t, { ...values, checkpoint: c.dir }),
          prepare,
          note: `resuming from ${c.dir}`,
        };
      }
      return {
        kind: 'launch',
        argv: renderCommandArgv(t, values),
        prepare,
        note: 'no checkpoint found: starting over',
      };
    },
    classify: classifyTrainFailure,
    failureType: trainFailureType,
    parse: (chunk, prev) => parseGenericProgress(chunk, prev),
  };
}
