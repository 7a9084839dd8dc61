/**
 * aerie's specforge driver against two-rank runs of the simulated HEAD CLI (real processes,
 * real files): per-rank checkpoint files, the sampler's per-rank step count, two ranks' dict
 * lines in one log, a kill at each point of a save, and resume refused at another world size
 * once, with the reason. What the sim imitates is cited in sim/specforge/{train,checkpoint,traceback}.ts.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { JobFailure, superviseJob } from '../../src/stages/common/job-supervise.js';
import { parseSpecforgeProgress, type CliTrainProgress } from '../../src/stages/train/specforge-progress.js';
import type { TrainProgress } from '../../src/stages/train/progress.js';
import type { TrainResult } from '../../src/stages/train/run.js';
import { classifySpecforgeFailure, runStopStep, specforgeHooks } from '../../src/stages/train/specforge-run.js';
import { listSpecforgeCheckpoints, planSpecforgeResume } from '../../src/stages/train/specforge-checkpoints.js';
import type { SpecforgeRun } from '../../src/stages/train/specforge-config.js';
import { useLocalHost } from '../support/local-host.js';
import { runSimCli } from '../support/sim.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SIM = [process.execPath, join(ROOT, 'bin/aerie-sim.mjs'), 'specforge'];
const fx = useLocalHost('aerie-ranks-', { sub: 'work' });
let dir: string;
let host: LocalHost;
let features: string;

beforeAll(async () => {
  ({ dir, host } = fx);
  features = join(dir, 'features');
  await mkdir(join(features, 'rows_0-2000'), { recursive: true });
  // 9 files: at two ranks DistributedSampler pads to 10, 5 per rank (launch.py:234-239).
  for (let i = 0; i < 9; i++) await writeFile(join(features, 'rows_0-2000', `data_${i}.ckpt`), 'x');
});

function specforgeRun(name: string, world: number, extra: Partial<SpecforgeRun> = {}): SpecforgeRun {
  const trainDir = join(dir, name);
  return {
    launcher: SIM,
    configPath: join(trainDir, 'specforge.yaml'),
    runId: 'r',
    outputDir: join(trainDir, 'output'),
    targetModelPath: join(ROOT, 'examples/models/sim-llama-8b'),
    draftModelConfig: join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json'),
    targetBackend: 'sglang',
    trainDataPath: join(dir, 'unused.jsonl'),
    hiddenStatesPath: features,
    chatTemplate: 'llama3',
    maxLength: 2048,
    numEpochs: 2,
    batchSize: 2,
    learningRate: 1e-4,
    tttLength: 7,
    saveInterval: 1,
    overrides: { 'deployment.trainer.nproc_per_node': world, 'training.log_interval': 1 },
    ...extra,
  };
}

const tag = (run: SpecforgeRun): string => run.configPath.split('/').at(-2)!;

async function supervise(run: SpecforgeRun, env: Record<string, string> = {}) {
  const trainDir = join(run.configPath, '..');
  const seen: TrainProgress[] = [];
  const base = {
    host,
    cwd: trainDir,
    env: { AERIE_SIM_TIME_SCALE: '0', ...env },
    pollMs: 20,
    heartbeat: () => undefined,
  };
  const hooks = specforgeHooks(host, run, join(trainDir, 'drafter'), {
    ...base,
    crashRetries: 1,
    prefix: `${tag(run)}.export.`,
    logPath: (g) => join(trainDir, `export-${g}.log`),
  });
  const notes: string[] = [];
  const outcome = await superviseJob<TrainResult, TrainProgress>(
    {
      ...base,
      prefix: `${tag(run)}.train.`,
      logPath: (g) => join(trainDir, `train-${g}.log`),
      crashRetries: 3,
      what: 'trainer',
      crashType: 'TrainerCrashed',
      heartbeat: (d) => {
        if (d.progress) seen.push(d.progress);
        if (d.note) notes.push(d.note);
      },
    },
    {
      ...hooks,
      afterCrash: async (ended, failure) => {
        const next = await hooks.afterCrash(ended, failure);
        if (next.kind === 'launch' && next.note) notes.push(next.note);
        return next;
      },
    },
  );
  return { outcome, seen, notes, trainDir };
}

const launched = async (run: SpecforgeRun, gen: number) => (await host.findLaunch(`${tag(run)}.train.${gen}`))?.argv;

describe('two ranks, simulated from SpecForge@a6b6b023', () => {
  it('a clean run: every rank writes its file, the sampler gives each rank ceil(9/2)=5 files, and two ranks’ dict lines read as one step', async () => {
    const run = specforgeRun('clean', 2);
    // 5 per rank, batch 2, partial batch dropped: 2 steps an epoch, 2 epochs (trainer.py:151, launch.py:234-239).
    expect(runStopStep(run, 9)).toBe(4);
    expect(runStopStep(specforgeRun('x', 1), 9)).toBe(8);
    const { outcome, seen, trainDir } = await supervise(run, { AERIE_SIM_SPECFORGE_PRINT_RACE: '1' });
    expect(outcome.launches).toBe(1);
    expect(outcome.result.drafterDir).toBe(join(trainDir, 'drafter'));
    expect((await readdir(run.outputDir)).sort()).toEqual(['r-latest', 'r-step1', 'r-step2', 'r-step3', 'r-step4']);
    for (const s of [1, 2, 3, 4]) {
      expect((await readdir(join(run.outputDir, `r-step${s}`))).sort()).toEqual([
        'training_state.pt',
        'training_state_rank0.pt',
        'training_state_rank1.pt',
      ]);
    }
    expect(await readlink(join(run.outputDir, 'r-latest'))).toBe('r-step4');

    const log = await readFile(join(trainDir, 'train-0.log'), 'utf8');
    // Two prints per step; odd steps' texts ran together before their newlines.
    expect(log.match(/step \d+: \{/g)).toHaveLength(8);
    expect(log).toMatch(/^step 1: \{[^\n]*\}step 1: \{[^\n]*\}\n\n/m);
    expect(log).toContain('Setting OMP_NUM_THREADS environment variable for each process to be 1');
    const last = seen.at(-1) as CliTrainProgress;
    expect(last.step).toBe(4);
    expect(last.totalSteps).toBe(4);
    expect(last.loss).toBeGreaterThan(0);
    // Any chunking of the same log reads the same.
    let p: CliTrainProgress | undefined;
    for (let i = 0; i < log.length; i += 97) p = parseSpecforgeProgress(log.slice(i, i + 97), p);
    expect(p!.step).toBe(4);
    expect(p!.loss).toBe(parseSpecforgeProgress(log).loss);
  });

  // Killed in step 3's save: where the kill lands decides which checkpoint is complete.
  const cases = [
    {
      point: 'rank0-opened',
      files: ['training_state_rank0.pt.tmp'],
      resumeFrom: 2,
      skipped: /r-step3 lacks training_state\.pt, training_state_rank0\.pt, training_state_rank1\.pt/,
    },
    {
      point: 'shared-written',
      files: ['training_state.pt', 'training_state_rank0.pt'],
      resumeFrom: 2,
      skipped: /r-step3 lacks training_state_rank1\.pt/,
    },
    {
      point: 'peers-written',
      files: ['training_state.pt.tmp', 'training_state_rank0.pt', 'training_state_rank1.pt'],
      resumeFrom: 2,
      skipped: /r-step3 lacks training_state\.pt/,
    },
    {
      point: 'files-written',
      files: ['training_state.pt', 'training_state_rank0.pt', 'training_state_rank1.pt'],
      resumeFrom: 3,
      skipped: undefined,
    },
  ] as const;
  for (const c of cases) {
    it(`killed at ${c.point} of a save: resumes from step ${c.resumeFrom}, the newest checkpoint with all of both ranks' files`, async () => {
      const run = specforgeRun(`kill-${c.point}`, 2);
      const once = join(dir, `once-${c.point}`);
      const killedDir = join(run.outputDir, 'r-step3');
      // Snapshot the kill's leftovers from inside the planner, before the relaunch rewrites them.
      let leftovers: string[] = [];
      let latest = '';
      const origList = host.list.bind(host);
      host.list = async (p: string) => {
        if (p === run.outputDir && existsSync(once) && !leftovers.length && existsSync(killedDir)) {
          leftovers = (await readdir(killedDir)).sort();
          latest = await readlink(join(run.outputDir, 'r-latest'));
        }
        return origList(p);
      };
      try {
        const { outcome, notes, trainDir } = await supervise(run, {
          AERIE_SIM_SPECFORGE_CRASH_IN_SAVE: `3:${c.point}`,
          AERIE_SIM_FAULT_ONCE: once,
        });
        expect(leftovers).toEqual([...c.files].sort());
        expect(latest).toBe('r-step2'); // -latest moves only after every rank's files (checkpoint.py:102-104)
        expect(outcome.launches).toBe(2);
        expect((await launched(run, 1))!.at(-1)).toBe(
          `training.resume_from=${join(run.outputDir, `r-step${c.resumeFrom}`)}`,
        );
        const note = notes.find((n) => n.startsWith('resuming from'))!;
        if (c.skipped) expect(note).toMatch(c.skipped);
        else expect(note).toBe(`resuming from ${join(run.outputDir, 'r-step3')}`);
        const second = await readFile(join(trainDir, 'train-1.log'), 'utf8');
        // Rank 0 alone deletes the stale step 3 when it saves step 3 again (checkpoint.py:85-86,109-120).
        expect(second.match(/rewinding checkpoint timeline/g)?.length ?? 0).toBe(c.resumeFrom === 2 ? 1 : 0);
        expect((await readdir(join(run.outputDir, 'r-step4'))).sort()).toEqual([
          'training_state.pt',
          'training_state_rank0.pt',
          'training_state_rank1.pt',
        ]);
        expect((await host.findLaunch(`${tag(run)}.export.0`))!.argv).toContain(join(run.outputDir, 'r-step4'));
      } finally {
        host.list = origList;
      }
    });
  }

  it('a relaunch at world size 1 over two-rank checkpoints fails once, before launching, and says why', async () => {
    const run = specforgeRun('shrink', 2);
    await supervise(run);
    // The researcher drops to one process and a crashed launch is relaunched.
    const shrunk = specforgeRun('shrink', 1);
    const plan = planSpecforgeResume(await listSpecforgeCheckpoints(host, run.outputDir, 'r'), 1);
    expect(plan).toMatchObject({ kind: 'world-mismatch', writtenAt: 2, worldSize: 1 });
    const hooks = specforgeHooks(host, shrunk, join(dir, 'shrink', 'drafter'), {} as never);
    const ended = { gen: 0, record: {} as never, code: 137, logTail: '' };
    const err = await hooks.afterCrash(ended, classifySpecforgeFailure('')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JobFailure);
    expect((err as JobFailure).type).toBe('TrainerFailed');
    expect((err as JobFailure).message).toMatch(
      /written at world size 2 \(r-step\d+ \(what -latest points at\) holds training_state_rank0\.pt … training_state_rank1\.pt\), this launch trains at world size 1/,
    );
    expect((err as JobFailure).message).toMatch(/deployment\.trainer\.nproc_per_node \(× nnodes\) back to 2/);
  });

  it('a first save cut short then a relaunch at world size 1: SpecForge refuses, and aerie stops after that one launch', async () => {
    const run = specforgeRun('first-cut', 2);
    const once = join(dir, 'once-first-cut');
    const trainDir = join(run.configPath, '..');
    // Launch 0 at two ranks, killed in step 1's save after rank 0's files: nothing proves the
    // world size (no -latest, no older step), so the directory looks complete at one rank.
    const shrunk = { ...run, overrides: { ...run.overrides, 'deployment.trainer.nproc_per_node': 1 } };
    let launches = 0;
    const err = await superviseJob<TrainResult, TrainProgress>(
      {
        host,
        cwd: trainDir,
        env: { AERIE_SIM_TIME_SCALE: '0', AERIE_SIM_SPECFORGE_CRASH_IN_SAVE: '1', AERIE_SIM_FAULT_ONCE: once },
        pollMs: 20,
        heartbeat: () => undefined,
        prefix: 'first-cut.train.',
        logPath: (g) => join(trainDir, `train-${g}.log`),
        crashRetries: 5,
        what: 'trainer',
        crashType: 'TrainerCrashed',
      },
      (() => {
        const two = specforgeHooks(host, run, join(trainDir, 'drafter'), {} as never);
        const one = specforgeHooks(host, shrunk, join(trainDir, 'drafter'), {} as never);
        return {
          ...two,
          fresh: async () => (launches++, two.fresh()),
          afterCrash: async (e, f) => (launches++, one.afterCrash(e, f)),
        };
      })(),
    ).catch((e: unknown) => e);
    expect(launches).toBe(2);
    expect(err).toBeInstanceOf(JobFailure);
    expect((err as JobFailure).message).toMatch(
      /SpecForge refuses to resume a checkpoint written at world_size=2 with world_size=1/,
    );
    const log = await readFile(join(trainDir, 'train-1.log'), 'utf8');
    expect(log).toMatch(
      /^\[rank0\]: ValueError: checkpoint \S+r-step1 has no usable per-rank state for rank 0 at world_size=1 \(written at world_size=2\)/m,
    );
    expect(log).not.toContain('ChildFailedError'); // one rank: no torchrun (launch_plan.py:540-541)
  });
});

describe("the simulated CLI's refusals, each as aerie classifies it", () => {
  const cfg = async (name: string): Promise<string> => {
    const p = join(dir, `${name}.yaml`);
    await writeFile(
      p,
      [
        'run_id: r',
        `output_dir: ${join(dir, name)}`,
        'model:',
        `  target_model_path: ${join(ROOT, 'examples/models/sim-llama-8b')}`,
        `  draft_model_config: ${join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json')}`,
        'data:',
        `  hidden_states_path: ${features}`,
        'training:',
        '  num_epochs: 1',
        '  batch_size: 1',
        '  save_interval: 2',
      ].join('\n'),
    );
    return p;
  };
  const train = (config: string, env: Record<string, string>, ...o: string[]) =>
    runSimCli(['specforge', 'train', '-c', config, ...o], { AERIE_SIM_TIME_SCALE: '0', ...env });

  it('one-rank checkpoints resumed at two ranks: both ranks refuse, torchrun reports both, and aerie does not retry', async () => {
    const c = await cfg('grow');
    expect(train(c, {}).status).toBe(0);
    const r = train(
      c,
      {},
      `training.resume_from=${join(dir, 'grow', 'r-step4')}`,
      'deployment.trainer.nproc_per_node=2',
    );
    expect(r.status).toBe(1);
    for (const rank of [0, 1])
      expect(r.stderr).toMatch(
        new RegExp(
          `^\\[rank${rank}\\]: ValueError: checkpoint \\S+ has no usable per-rank state for rank ${rank} at world_size=2 \\(written at world_size=1\\)`,
          'm',
        ),
      );
    expect(r.stderr).toMatch(
      /specforge\.cli FAILED\n-+\nFailures:\n\[1\]:\n(.*\n){2}  rank      : 1 \(local_rank: 1\)\n[\s\S]*Root Cause \(first observed failure\):\n\[0\]:\n(.*\n){2}  rank      : 0 \(local_rank: 0\)/,
    );
    const f = classifySpecforgeFailure(r.stderr);
    expect(f).toMatchObject({ kind: 'usage', retryable: false });
    expect(f.advice).toMatch(/written at world_size=1 with world_size=2.*nproc_per_node × nnodes = 1/);
  });

  it('a checkpoint lacking rank 1’s file passed at two ranks: rank 1 alone refuses, classified as a save cut short', async () => {
    const c = await cfg('cut');
    const out = join(dir, 'cut');
    expect(train(c, { AERIE_SIM_SPECFORGE_CRASH_IN_SAVE: '4' }, 'deployment.trainer.nproc_per_node=2').status).toBe(
      137,
    );
    expect((await readdir(join(out, 'r-step4'))).sort()).toEqual(['training_state.pt', 'training_state_rank0.pt']);
    const r = train(c, {}, `training.resume_from=${join(out, 'r-step4')}`, 'deployment.trainer.nproc_per_node=2');
    expect(r.status).toBe(1);
    expect(r.stderr).not.toMatch(/\[rank0\]: ValueError/);
    expect(r.stderr).toMatch(
      /^\[rank1\]: ValueError: checkpoint \S+r-step4 has no usable per-rank state for rank 1 at world_size=2 \(written at world_size=2\)/m,
    );
    const f = classifySpecforgeFailure(r.stderr);
    expect(f).toMatchObject({ kind: 'usage', retryable: false });
    expect(f.advice).toMatch(/lacks a rank's training_state_rank<r>\.pt \(a save cut short\)/);
    // aerie's own planner would have passed step 2.
    const plan = planSpecforgeResume(await listSpecforgeCheckpoints(host, out, 'r'), 2);
    expect(plan.kind === 'resume' && plan.checkpoint.step).toBe(2);
  });
});
