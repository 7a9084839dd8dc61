/**
 * The simulated train_eagle3.py at each v0.2 revision (AERIE_SIM_SPECFORGE_REVISION): what it
 * prints (only what the real script gets into a log), which checkpoints it leaves, which flags
 * it takes, and how it dies. Resume and continuation: train-resume.test.ts.
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { classifyTrainFailure } from '../../src/stages/common/train-failure.js';
import { latestCheckpoint } from '../../src/stages/train/v02-checkpoints.js';
import { parseTrainProgress, seedProgress } from '../../src/stages/train/progress.js';
import { renderTrainArgv } from '../../src/stages/train/v02-argv.js';
import { BIN, killLive, launch, makeFixture, readCheckpoint, run, start, waitFor } from '../support/sim-train.js';
import { signalGroup } from '../support/processes.js';
import { removeWorkdir } from '../support/workdir.js';

let tmp: string;
const rev = (r: string) => ({ AERIE_SIM_SPECFORGE_REVISION: r });
// Lines the real script sends to logger.info, which has no handler (SpecForge@73e6f808:specforge/utils.py:52-61).
const LOGGER_ONLY =
  /rank 0:|Auto-calculated total_steps|Saved model configuration|Saved full training state|Training completed at step|Finetuning from base model|Starting training from|Initialized/;

beforeAll(async () => {
  tmp = await makeFixture();
  expect(existsSync(BIN)).toBe(true);
});
afterEach(killLive);
afterAll(async () => {
  await removeWorkdir(tmp);
});

describe('aerie-sim train: a run at each v0.2 revision', () => {
  it('v0.2.0 (73e6f808): no args dump and no logger lines, saves only every --save-interval, no final checkpoint, dies in teardown', async () => {
    const out = path.join(tmp, 'v020');
    const l = launch(tmp, out);
    const r = await run(renderTrainArgv(l));
    // As the real run did on torch 2.11 (test/fixtures/real/specforge-73e6f808/clean.log): exit 1 after training.
    expect(r.code, r.stderr).toBe(1);
    expect(classifyTrainFailure(r.stderr)).toMatchObject({
      kind: 'teardown',
      retryable: true,
      evidence: 'ValueError: Invalid process group specified',
    });
    expect(r.stdout).not.toMatch(LOGGER_ONLY);
    expect(r.stdout).not.toContain('【args】');
    expect((await fs.readdir(out)).sort()).toEqual(['epoch_0_step_3', 'epoch_1_step_6']);
    const p = parseTrainProgress(r.stderr, seedProgress(l));
    expect([p.epoch, p.step, p.totalSteps, p.stepsPerEpoch]).toEqual([1, 8, 8, 4]);
    expect(r.stderr).toMatch(
      /Training Epoch 1: 100%\|██████████\| 4\/4 \[[^\]]*, loss=[\d.]+, acc=[\d.]+, time=[\d.]+s\]\n\n\[rank0\]: Traceback/,
    );
  }, 60_000);

  it('v0.2-final-save (03a3dedb): the args dump, then a final checkpoint when the steps are not a multiple of the interval', async () => {
    const out = path.join(tmp, 'final');
    const r = await run(renderTrainArgv(launch(tmp, out)), rev('v0.2-final-save'));
    expect(r.code, r.stderr).toBe(1); // the old teardown (fixed in 7a81ce53)
    expect(classifyTrainFailure(r.stderr).kind).toBe('teardown');
    expect(r.stdout).toMatch(/^\n -----------【args】-----------\n/);
    expect(r.stdout).not.toMatch(LOGGER_ONLY);
    expect(r.stdout).toMatch(/^dataloader_num_workers +·* 4$/m);
    expect((await fs.readdir(out)).sort()).toEqual(['epoch_0_step_3', 'epoch_1_step_6', 'epoch_1_step_8']);
    const p = parseTrainProgress(r.stdout + r.stderr);
    expect([p.step, p.totalSteps, p.totalEpochs]).toEqual([8, 8, 2]);
    // v0.2 writes no per-rank files: rank 0's training_state.pt and save_pretrained's two (SpecForge@20e2e3f0:scripts/train_eagle3.py:714-726).
    const fin = await readCheckpoint(path.join(out, latestCheckpoint(await fs.readdir(out))!.dir));
    expect(fin.files).toEqual(['config.json', 'model.safetensors', 'training_state.pt']);
    expect([fin.problems, fin.whole]).toEqual([[], true]);
    expect(fin.config.aerie_sim).toMatchObject({ trained_sample_epochs: 20, trained_steps: 8 });
  }, 60_000);

  it('v0.2-resume (20e2e3f0): the meter also carries acceptance_rate and grad_norm', async () => {
    const out = path.join(tmp, 'late');
    const r = await run(renderTrainArgv(launch(tmp, out)), rev('v0.2-resume'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(LOGGER_ONLY);
    expect(r.stderr).toMatch(
      /4\/4 \[[^\]]*, loss=[\d.]+, acc=[\d.]+, acceptance_rate=[\d.]+, time=[\d.]+s, grad_norm=[\d.]+\]/,
    );
    const p = parseTrainProgress(r.stdout + r.stderr);
    expect(p.acceptanceRate).toBeGreaterThan(0);
    expect(p.gradNorm).toBeGreaterThan(0);
    expect((await fs.readdir(out)).sort()).toEqual(['epoch_0_step_3', 'epoch_1_step_6', 'epoch_1_step_8']);
  }, 60_000);

  it('the CLI revision has no train_eagle3.py: python cannot open it, and aerie does not retry', async () => {
    const r = await run(renderTrainArgv(launch(tmp, path.join(tmp, 'cli'))), rev('cli'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("can't open file 'scripts/train_eagle3.py': [Errno 2] No such file or directory");
    expect(classifyTrainFailure(r.stderr)).toMatchObject({ kind: 'missing-module', retryable: false });
  }, 60_000);
});

describe('aerie-sim train: flags by revision (argparse exit 2 on any the revision lacks)', () => {
  const cases: [string, string[], Record<string, boolean>][] = [
    [
      '--dataloader-num-workers (03a3dedb:109)',
      ['--dataloader-num-workers', '2'],
      { 'v0.2.0': false, 'v0.2-final-save': true, 'v0.2-resume': true },
    ],
    [
      '--sglang-enable-piecewise-cuda-graph (gone by 20e2e3f0)',
      ['--sglang-enable-piecewise-cuda-graph'],
      { 'v0.2.0': true, 'v0.2-final-save': true, 'v0.2-resume': false },
    ],
    [
      '--no-shard-target-output (BooleanOptionalAction, 20e2e3f0:123)',
      ['--no-shard-target-output'],
      { 'v0.2.0': false, 'v0.2-final-save': false, 'v0.2-resume': true },
    ],
  ];
  for (const [what, extra, accepted] of cases) {
    it(
      what,
      async () => {
        for (const [r, ok] of Object.entries(accepted)) {
          const res = await run(
            [...renderTrainArgv(launch(tmp, path.join(tmp, `flags-${r}`), { numEpochs: 1 })), ...extra],
            rev(r),
          );
          if (ok)
            expect([res.code, classifyTrainFailure(res.stderr).kind], `${r}: ${res.stderr.slice(-200)}`).toEqual(
              r === 'v0.2-resume' ? [0, 'crash'] : [1, 'teardown'],
            );
          else {
            expect(res.code, r).toBe(2);
            expect(res.stderr.trimEnd().split('\n').pop(), r).toBe(
              `train_eagle3.py: error: unrecognized arguments: ${extra.join(' ')}`,
            );
          }
        }
      },
      60_000,
    );
  }

  it('an unknown flag is an argparse error, exit 2, classified as a usage error', async () => {
    const r = await run([...renderTrainArgv(launch(tmp, path.join(tmp, 'bad'))), '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split('\n').pop()).toBe('train_eagle3.py: error: unrecognized arguments: --bogus');
    expect(classifyTrainFailure(r.stderr).kind).toBe('usage');
  }, 60_000);
});

describe('aerie-sim train: failures', () => {
  it('a crash while saving leaves the checkpoint under its real name, cut short, as a real kill -9 mid-save did', async () => {
    const out = path.join(tmp, 'cut');
    const r = await run(renderTrainArgv(launch(tmp, out)), {
      ...rev('v0.2-resume'),
      AERIE_SIM_TRAIN_CRASH_IN_SAVE: '6',
    });
    expect(r.code).toBe(1);
    expect(classifyTrainFailure(r.stderr)).toMatchObject({ kind: 'crash', retryable: true });
    expect((await fs.readdir(out)).sort()).toEqual(['epoch_0_step_3', 'epoch_1_step_6']);
    // test/fixtures/real/specforge-20e2e3f0/orphaned-worker/ls-after-kill.txt: the newest directory held a partial training_state.pt only.
    expect(await fs.readdir(path.join(out, 'epoch_1_step_6'))).toEqual(['training_state.pt']);
    expect((await readCheckpoint(path.join(out, 'epoch_0_step_3'))).whole).toBe(true);
  }, 60_000);

  it('an OOM dies with torch.OutOfMemoryError, exit 1, classified as not retryable', async () => {
    const out = path.join(tmp, 'oom');
    const r = await run(renderTrainArgv(launch(tmp, out)), { AERIE_SIM_FAULT: 'train-oom' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('torch.OutOfMemoryError: CUDA out of memory.');
    expect(classifyTrainFailure(r.stderr)).toMatchObject({ kind: 'oom', retryable: false });
    expect(await fs.readdir(out).catch(() => [])).toEqual([]);
  }, 60_000);

  it('offline, an epoch is the .ckpt files under the hidden-states path; none means zero steps and no checkpoint', async () => {
    const hs = path.join(tmp, 'hs/rows_0-2000');
    await fs.mkdir(hs, { recursive: true });
    for (let i = 0; i < 5; i++) await fs.writeFile(path.join(hs, `data_${i}.ckpt`), 'x');
    await fs.writeFile(path.join(hs, 'notes.txt'), 'not a sample');
    const r = await run(
      renderTrainArgv(
        launch(tmp, path.join(tmp, 'offline'), { hiddenStatesPath: path.join(tmp, 'hs'), batchSize: 2, numEpochs: 1 }),
      ),
      rev('v0.2-resume'),
    );
    expect(r.code).toBe(0);
    expect(parseTrainProgress(r.stderr).stepsPerEpoch).toBe(3);

    const empty = path.join(tmp, 'offline-empty');
    const e = await run(
      renderTrainArgv(launch(tmp, empty, { hiddenStatesPath: path.join(tmp, 'no-such-dir') })),
      rev('v0.2-resume'),
    );
    expect(e.code).toBe(0);
    expect(e.stderr).toContain('Training Epoch 0: 0it [00:00, ?it/s]\n');
    expect(existsSync(empty)).toBe(false);
  }, 60_000);

  it('SIGTERM to its process group stops it promptly with 143', async () => {
    const out = path.join(tmp, 'term');
    const data = path.join(tmp, 'data500.jsonl');
    await fs.writeFile(data, Array.from({ length: 500 }, (_, i) => JSON.stringify({ id: `t${i}` })).join('\n'));
    const t = start(renderTrainArgv(launch(tmp, out, { trainDataPath: data, batchSize: 1, saveInterval: 1 })), {
      AERIE_SIM_TIME_SCALE: '0.02',
    });
    await waitFor(async () => (await fs.readdir(out).catch(() => [])).length >= 2, 'two checkpoints');
    const sent = Date.now();
    signalGroup(t.child.pid!, 'SIGTERM'); // as a user's Ctrl-C or aerie's stop reaches the trainer's group
    const r = await t.done;
    expect(Date.now() - sent).toBeLessThan(5_000);
    expect(r.code).toBe(143);
  }, 60_000);
});
