/**
 * aerie's v0.2 readers on what real SpecForge left behind (test/fixtures/real/specforge-<commit>/,
 * captured by scripts/real/specforge_runs.sh on the lent H200), and the same assertions on the
 * simulator at the same revision: the simulator passes only where the real tool does.
 */
import { mkdir, readdir, readFile, truncate, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { SPECFORGE_PROFILES } from '../../src/stages/common/specforge-revision.js';
import { seedProgress, parseTrainProgress } from '../../src/stages/train/progress.js';
import { v02Hooks } from '../../src/stages/train/run.js';
import { classifyTrainFailure } from '../../src/stages/common/train-failure.js';
import { planTrainResume, rankCheckpoints } from '../../src/stages/train/v02-checkpoints.js';
import { type TrainLaunch } from '../../src/stages/train/launch.js';
import { useLocalHost } from '../support/local-host.js';
import { runSimCli } from '../support/sim.js';
import { useWorkdir } from '../support/workdir.js';

const ROOT = resolve(import.meta.dirname, '../..');
const REAL = (commit: string, file: string) =>
  readFile(join(ROOT, 'test/fixtures/real', `specforge-${commit}`, file), 'utf8');

/** `ls -la` of every directory under a root, as the capture wrote it: directory → [name, size, isDir]. */
function listing(text: string): Map<string, [string, number, boolean][]> {
  const dirs = new Map<string, [string, number, boolean][]>();
  let cur: [string, number, boolean][] | undefined;
  for (const line of text.split('\n')) {
    const head = /^(\/\S+):$/.exec(line);
    if (head) dirs.set(head[1]!, (cur = []));
    const row = /^([d-])\S+\s+\d+\s+\S+\s+\S+\s+(\d+)\s+(.+)$/.exec(line);
    if (row && cur && row[3] !== '.' && row[3] !== '..') cur.push([row[3]!, Number(row[2]), row[1] === 'd']);
  }
  return dirs;
}

const launch = (outputDir: string): TrainLaunch => ({
  launcher: ['torchrun', 'scripts/train_eagle3.py'],
  targetModelPath: '/tmp/real/target',
  draftModelConfig: '/tmp/real/draft-config.json',
  trainDataPath: '/d.jsonl',
  outputDir,
  chatTemplate: 'llama3',
  maxLength: 256,
  numEpochs: 1,
  batchSize: 1,
  learningRate: 1e-4,
  tttLength: 7,
  tpSize: 1,
  saveInterval: 5,
  extraArgs: [],
  profile: SPECFORGE_PROFILES['v0.2-resume'],
});

describe('real SpecForge 20e2e3f0 (v0.2-resume): log, checkpoints, resume', () => {
  it('reads step, totals, loss, acc, acceptance rate and grad norm from the real log, and no checkpoint from it', async () => {
    const p = parseTrainProgress(await REAL('20e2e3f0', 'clean.log'));
    expect(p).toMatchObject({
      epoch: 0,
      step: 24,
      stepsPerEpoch: 24,
      totalSteps: 24,
      totalEpochs: 1,
      loss: 1.07,
      acc: 0.45,
      acceptanceRate: 0.5,
      gradNorm: 0.09,
    });
    expect([p.lastCheckpoint, p.startedFrom]).toEqual([undefined, undefined]);
  });

  it('without SGLang installed the script dies importing it: not worth a relaunch, and the advice names the launcher', async () => {
    const f = classifyTrainFailure(await REAL('20e2e3f0', 'plain.log'));
    expect(f).toMatchObject({
      kind: 'missing-module',
      retryable: false,
      evidence: "ModuleNotFoundError: No module named 'sglang'",
    });
  });

  it('the real log has none of the logger.info lines (D13): only prints and meters', async () => {
    const log = await REAL('20e2e3f0', 'clean.log');
    for (const gone of [
      'Auto-calculated total_steps',
      'Saved model configuration',
      'Initialized distributed environment',
      'Starting training from',
    ])
      expect(log).not.toContain(gone);
    expect(log).toContain(' -----------【args】-----------');
  });

  it('a --resume names what it loaded (a real print) and its meter counts the skipped batches', async () => {
    const p = parseTrainProgress(await REAL('20e2e3f0', 'orphaned-worker/resume.log'));
    expect(p.startedFrom).toMatch(/\/train\/output\/epoch_0_step_24$/);
    expect([p.step, p.totalSteps]).toEqual([24, 24]);
  });

  it('checkpoints are epoch_{e}_step_{s} with three files and no per-rank state (D10); the last one covers the plan', async () => {
    const dirs = listing(await REAL('20e2e3f0', 'ls-after-clean.txt'));
    const out = [...dirs.keys()].find((d) => d.endsWith('/train/output'))!;
    const names = dirs
      .get(out)!
      .filter(([, , isDir]) => isDir)
      .map(([n]) => n);
    for (const n of names)
      expect(
        dirs
          .get(`${out}/${n}`)!
          .map(([f]) => f)
          .sort(),
        n,
      ).toEqual(['config.json', 'model.safetensors', 'training_state.pt']);
    const [newest] = rankCheckpoints([{ dir: out, baseStep: 0, entries: names }]);
    expect(newest!.dir).toBe(`${out}/epoch_0_step_24`);
    expect(planTrainResume(launch(out), newest!, 24, true)).toMatchObject({ kind: 'done' });
  });
});

// orphaned-worker/: the listing was taken mid-save (a kill that missed the torchrun worker, which went on): a real half-written checkpoint.
describe('a real kill -9 mid-save and --resume past the moved-aside checkpoint (20e2e3f0)', () => {
  it('--resume took the checkpoint before the damaged one, skipped its batches, and the run covers the plan', async () => {
    expect(await REAL('20e2e3f0', 'resume-pick.txt')).toMatch(
      /^moved damaged \S+\/epoch_0_step_10 .* to \S+\/epoch_0_step_10\.incomplete-\d+/,
    );
    const p = parseTrainProgress(await REAL('20e2e3f0', 'resume.log'));
    expect(p.startedFrom).toMatch(/\/epoch_0_step_5$/);
    expect([p.step, p.totalSteps]).toEqual([24, 24]);
    const dirs = listing(await REAL('20e2e3f0', 'ls-after-resume.txt'));
    const out = [...dirs.keys()].find((d) => d.endsWith('/train/output'))!;
    const ranked = rankCheckpoints([{ dir: out, baseStep: 0, entries: dirs.get(out)!.map(([n]) => n) }]);
    expect(ranked.map((c) => c.step)).toEqual([24, 20, 15, 10, 5]); // the .incomplete-* directory is not a checkpoint
    expect(planTrainResume(launch(out), ranked[0]!, 24, true)).toMatchObject({ kind: 'done' });
  });
});

describe('a real checkpoint caught mid-save (20e2e3f0), laid out again on a host', () => {
  const fx = useLocalHost('aerie-real-v02-', { each: true, sub: 'host' });
  let dir: string;
  let host: LocalHost;
  beforeEach(() => {
    ({ dir, host } = fx);
  });

  it('the newest directory holds a cut-short training_state.pt only: aerie moves it aside and resumes from the one before', async () => {
    const dirs = listing(await REAL('20e2e3f0', 'orphaned-worker/ls-after-kill.txt'));
    const realOut = [...dirs.keys()].find((d) => d.endsWith('/train/output'))!;
    const out = join(dir, 'output');
    const header = JSON.parse(await REAL('20e2e3f0', 'checkpoint-safetensors-header.json')) as Record<
      string,
      { dtype: string; shape: number[] }
    >;
    for (const [name, , isDir] of dirs.get(realOut)!) {
      if (!isDir) continue;
      await mkdir(join(out, name), { recursive: true });
      for (const [file, size] of dirs.get(`${realOut}/${name}`)!) {
        const path = join(out, name, file);
        if (file === 'config.json') await writeFile(path, await REAL('20e2e3f0', 'checkpoint-config.json'));
        else if (file === 'model.safetensors') await writeFile(path, safetensors(header, size));
        else {
          await writeFile(path, '');
          await truncate(path, size);
        }
      }
    }
    const hooks = v02Hooks(host, launch(out), 'r.train.');
    const next = await hooks.afterCrash(
      { gen: 0, record: {} as never, code: 137, logTail: '' },
      classifyTrainFailure(''),
    );
    if (next.kind !== 'launch') throw new Error('expected a launch');
    expect(next.argv).toContain('--resume');
    expect(next.note).toMatch(/moved damaged checkpoint .*epoch_0_step_10 .*so --resume does not load it/);
    const left = (await readdir(out)).sort();
    expect(left.filter((n) => /^epoch_0_step_10\.incomplete-\d+$/.test(n))).toHaveLength(1);
    // What get_last_checkpoint can still match (SpecForge@20e2e3f0:specforge/utils.py:232): only the whole one.
    expect(left.filter((n) => /^epoch_\d+(_step_\d+)?$/.test(n))).toEqual(['epoch_0_step_5']);
  });
});

describe('real SpecForge 73e6f808 (v0.2.0, transformers 4.57.1)', () => {
  const v020 = (out: string): TrainLaunch => ({ ...launch(out), profile: SPECFORGE_PROFILES['v0.2.0'] });

  it('a finished run exits 1 in destroy_distributed: aerie reads that as the end of training, not a crash to relaunch', async () => {
    const log = await REAL('73e6f808', 'clean.log');
    expect(classifyTrainFailure(log)).toMatchObject({
      kind: 'teardown',
      retryable: true,
      evidence: 'ValueError: Invalid process group specified',
    });
    const p = parseTrainProgress(log, seedProgress({ numEpochs: 1, maxNumSteps: undefined }));
    expect([p.step, p.stepsPerEpoch, p.totalSteps, p.loss, p.acc]).toEqual([24, 24, 24, 0.7, 0]);
    expect(parseTrainProgress(log).totalSteps).toBeUndefined(); // no args dump in the release: totals come from the launch
  });

  it('no final save: 24 steps, saves every 5, the last is step 20; aerie keeps it and says which steps it lacks', async () => {
    const dirs = listing(await REAL('73e6f808', 'ls-after-clean.txt'));
    const out = [...dirs.keys()].find((d) => d.endsWith('/train/output'))!;
    const names = dirs
      .get(out)!
      .filter(([, , isDir]) => isDir)
      .map(([n]) => n);
    expect(names.sort()).toEqual(['epoch_0_step_10', 'epoch_0_step_15', 'epoch_0_step_20', 'epoch_0_step_5']);
    const plan = planTrainResume(v020(out), rankCheckpoints([{ dir: out, baseStep: 0, entries: names }])[0]!, 24, true);
    expect(plan).toMatchObject({ kind: 'done', finalCheckpoint: { dir: `${out}/epoch_0_step_20` } });
    expect(plan.kind === 'done' && plan.note).toMatch(
      /the last 4 of 24 steps were trained but not saved.*divisor of 24 \(e\.g\. 4\)/,
    );
  });

  it('--ckpt-dir dies in build_dataloaders at this revision, which is why aerie continues through the epoch_0 link instead', async () => {
    const log = await REAL('73e6f808', 'resume.log');
    expect(log).toContain("AttributeError: 'str' object has no attribute 'vocab_size'");
    expect(log).toContain('train_eagle3.py", line 402, in build_dataloaders');
  });

  it('logs nothing of print_with_rank even where it ran: the traceback is past it (train_eagle3.py:622 < 627)', async () => {
    const log = await REAL('73e6f808', 'transformers-5.17/clean.log');
    expect(log).toContain('train_eagle3.py", line 627, in main');
    expect(log).not.toContain('Initialized distributed environment');
    expect(log).not.toContain(' -----------【args】-----------'); // the release prints no args (ee22b877 added that)
  });

  it('a draft model the installed transformers cannot build is not relaunched: it fails the same way every time', async () => {
    const f = classifyTrainFailure(await REAL('73e6f808', 'transformers-5.17/clean.log'));
    expect(f).toMatchObject({
      kind: 'setup',
      retryable: false,
      evidence: 'ValueError: Unknown RoPE scaling type default',
    });
    expect(f.advice).toMatch(/draft-model-config.*transformers/);
  });
});

describe('the simulator gives the parser what the real log gives it', () => {
  const tmp = useWorkdir('aerie-real-sim-', { each: true });
  it('same fields, same shapes, for a run of the same plan', async () => {
    const work = tmp.path;
    await writeFile(
      join(work, 'data.jsonl'),
      Array.from({ length: 24 }, (_, i) => JSON.stringify({ id: `r${i}`, conversations: [] })).join('\n') + '\n',
    );
    const argv = [
      '--target-model-path',
      join(ROOT, 'examples/models/sim-llama-8b'),
      '--draft-model-config',
      join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json'),
      '--train-data-path',
      join(work, 'data.jsonl'),
      '--num-epochs',
      '1',
      '--batch-size',
      '1',
      '--save-interval',
      '5',
      '--output-dir',
      join(work, 'out'),
    ];
    const r = runSimCli(['train', ...argv], {
      AERIE_SIM_TIME_SCALE: '0',
      AERIE_SIM_SPECFORGE_REVISION: 'v0.2-resume',
    });
    expect(r.status, r.stderr).toBe(0);
    const sim = parseTrainProgress(r.stdout + r.stderr);
    const real = parseTrainProgress(await REAL('20e2e3f0', 'clean.log'));
    const shape = (p: typeof sim) =>
      Object.fromEntries(
        Object.entries(p)
          .filter(([k]) => k !== 'partial' && k !== 'lines')
          .map(([k, v]) => [k, typeof v]),
      );
    expect(shape(sim)).toEqual(shape(real));
    expect([sim.step, sim.totalSteps, sim.stepsPerEpoch]).toEqual([real.step, real.totalSteps, real.stepsPerEpoch]);
    expect((await readdir(join(work, 'out'))).sort()).toEqual([
      'epoch_0_step_10',
      'epoch_0_step_15',
      'epoch_0_step_20',
      'epoch_0_step_24',
      'epoch_0_step_5',
    ]);
    expect(parseTrainProgress(r.stderr, seedProgress({ numEpochs: 1, maxNumSteps: undefined })).totalSteps).toBe(24);
  });
});

describe('the simulator at v0.2.0 ends as the real 73e6f808 run ended', () => {
  const tmp = useWorkdir('aerie-real-sim-', { each: true });
  it('same steps and checkpoints, no final save, the same teardown failure', async () => {
    const work = tmp.path;
    await writeFile(
      join(work, 'data.jsonl'),
      Array.from({ length: 24 }, (_, i) => JSON.stringify({ id: `r${i}`, conversations: [] })).join('\n') + '\n',
    );
    const argv = [
      '--target-model-path',
      join(ROOT, 'examples/models/sim-llama-8b'),
      '--draft-model-config',
      join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json'),
      '--train-data-path',
      join(work, 'data.jsonl'),
      '--num-epochs',
      '1',
      '--batch-size',
      '1',
      '--save-interval',
      '5',
      '--output-dir',
      join(work, 'out'),
    ];
    const r = runSimCli(['train', ...argv], { AERIE_SIM_TIME_SCALE: '0', AERIE_SIM_SPECFORGE_REVISION: 'v0.2.0' });
    const realLog = await REAL('73e6f808', 'clean.log');
    expect(r.status).toBe(1);
    expect(classifyTrainFailure(r.stderr)).toMatchObject({
      kind: 'teardown',
      evidence: classifyTrainFailure(realLog).evidence,
    });
    const seed = seedProgress({ numEpochs: 1, maxNumSteps: undefined });
    const [sim, real] = [parseTrainProgress(r.stdout + r.stderr, seed), parseTrainProgress(realLog, seed)];
    expect([sim.step, sim.totalSteps, sim.stepsPerEpoch, sim.totalEpochs]).toEqual([
      real.step,
      real.totalSteps,
      real.stepsPerEpoch,
      real.totalEpochs,
    ]);
    expect((await readdir(join(work, 'out'))).sort()).toEqual([
      'epoch_0_step_10',
      'epoch_0_step_15',
      'epoch_0_step_20',
      'epoch_0_step_5',
    ]);
  });
});

/** A safetensors file with the real header's tensors, padded or cut to `size` bytes as the real file was. */
function safetensors(header: Record<string, { dtype: string; shape: number[] }>, size: number): Buffer {
  const width: Record<string, number> = { BF16: 2, F32: 4, I64: 8, BOOL: 1 };
  const entries: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let off = 0;
  for (const [name, t] of Object.entries(header)) {
    if (name === 'header_bytes' || name === '__metadata__') continue;
    const n = t.shape.reduce((a, b) => a * b, 1) * width[t.dtype]!;
    entries[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + n] };
    off += n;
  }
  const json = Buffer.from(JSON.stringify(entries));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  const whole = Buffer.concat([len, json, Buffer.alloc(off)]);
  return whole.length >= size ? whole : Buffer.concat([whole, Buffer.alloc(size - whole.length)]);
}
