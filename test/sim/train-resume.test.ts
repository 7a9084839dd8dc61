/**
 * Crash and continue on the simulated train_eagle3.py, driven by aerie's own planner: at each
 * v0.2 revision the relaunch aerie plans must end where an uninterrupted run ends, and the
 * simulator's --resume must be as broken or as working as the real one.
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SPECFORGE_PROFILES } from '../../src/stages/common/specforge-revision.js';
import { classifyTrainFailure } from '../../src/stages/common/train-failure.js';
import { parseTrainProgress } from '../../src/stages/train/progress.js';
import { planTrainResume, rankCheckpoints } from '../../src/stages/train/v02-checkpoints.js';
import { renderTrainArgv } from '../../src/stages/train/v02-argv.js';
import { killLive, launch, listSegments, makeFixture, readCheckpoint, run } from '../support/sim-train.js';
import { removeWorkdir } from '../support/workdir.js';

let tmp: string;
const rev = (r: string) => ({ AERIE_SIM_SPECFORGE_REVISION: r });

beforeAll(async () => {
  tmp = await makeFixture();
});
afterEach(killLive);
afterAll(async () => {
  await removeWorkdir(tmp);
});

describe('aerie-sim train: resuming as each revision does', () => {
  it('v0.2.0: --ckpt-dir dies at 73e6f808, as the real one did', async () => {
    const out = path.join(tmp, 'ckpt-dir');
    expect((await run(renderTrainArgv(launch(tmp, out, { saveInterval: 4, numEpochs: 1 })))).code).toBe(1); // teardown
    const r = await run(
      renderTrainArgv(launch(tmp, path.join(out, 'again'), { resumeFrom: path.join(out, 'epoch_0_step_4') })),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("[rank0]: AttributeError: 'str' object has no attribute 'vocab_size'"); // test/fixtures/real/specforge-73e6f808/resume.log
  }, 90_000);

  it("v0.2.0: crash, then aerie's continuation (epoch_0 link + --resume) into resume_step_N, ends where an uninterrupted run ends", async () => {
    const plain = path.join(tmp, 'reference');
    // 8 steps, save every 4: the last step saves even without a final save; then the old teardown fails.
    expect((await run(renderTrainArgv(launch(tmp, plain, { saveInterval: 4 })))).code).toBe(1);
    const reference = await readCheckpoint(path.join(plain, 'epoch_1_step_8'));

    const out = path.join(tmp, 'crashy');
    const faults = { AERIE_SIM_TRAIN_CRASH_AT_STEP: '5', AERIE_SIM_FAULT_ONCE: path.join(tmp, 'crash-once') };
    const first = launch(tmp, out, { saveInterval: 4 });
    const crashed = await run(renderTrainArgv(first), faults);
    expect(crashed.code).toBe(1);
    expect(crashed.stderr).toContain('[rank0]: Traceback (most recent call last):');
    expect(await fs.readdir(out)).toEqual(['epoch_0_step_4']);

    const stepsPerEpoch = parseTrainProgress(crashed.stderr).stepsPerEpoch!;
    const plan = planTrainResume(first, rankCheckpoints(await listSegments(out))[0]!, stepsPerEpoch);
    if (plan.kind !== 'continue') throw new Error(`expected a continuation, got ${plan.kind}`);
    expect([
      plan.from.dir,
      plan.stepsOwed,
      plan.launch.outputDir,
      plan.launch.resumeLink,
      plan.launch.resumeFrom,
    ]).toEqual([`${out}/epoch_0_step_4`, 4, `${out}/resume_step_4`, `${out}/epoch_0_step_4`, undefined]);
    // What the driver's prepare does before the launch (train-run.ts).
    await fs.mkdir(plan.launch.outputDir, { recursive: true });
    await fs.symlink(plan.launch.resumeLink!, path.join(plan.launch.outputDir, 'epoch_0'));
    const argv = renderTrainArgv(plan.launch);
    expect([argv.includes('--resume'), argv.includes('--ckpt-dir')]).toEqual([true, false]);

    const cont = await run(argv, faults); // same env: the one-shot crash does not fire again
    expect(cont.code, cont.stderr).toBe(1);
    expect(classifyTrainFailure(cont.stderr).kind).toBe('teardown');
    expect(cont.stdout).not.toContain('Finetuning from base model'); // logger.info (SpecForge@73e6f808:scripts/train_eagle3.py:340)
    const done = planTrainResume(first, rankCheckpoints(await listSegments(out))[0]!, stepsPerEpoch, true);
    if (done.kind !== 'done') throw new Error(`expected done, got ${done.kind}`);
    expect([done.finalCheckpoint.dir, done.finalCheckpoint.totalStep, done.note]).toEqual([
      `${out}/resume_step_4/epoch_0_step_4`,
      8,
      undefined,
    ]);
    const fin = await readCheckpoint(done.finalCheckpoint.dir);
    expect(fin.problems).toEqual([]);
    expect(fin.config).toEqual(reference.config);
  }, 90_000);

  for (const broken of ['v0.2.0', 'v0.2-final-save']) {
    it(`${broken}: --resume finds none of the epoch_{e}_step_{s} it saved and starts over from step 0, silently`, async () => {
      const out = path.join(tmp, `resume-${broken}`);
      expect(
        (await run(renderTrainArgv(launch(tmp, out)), { ...rev(broken), AERIE_SIM_TRAIN_CRASH_AT_STEP: '5' })).code,
      ).toBe(1);
      const again = await run([...renderTrainArgv(launch(tmp, out)), '--resume'], rev(broken));
      expect(classifyTrainFailure(again.stderr).kind).toBe('teardown');
      expect(again.stdout).not.toContain('Last checkpoint detected');
      expect(again.stderr).toContain('Training Epoch 0:  25%|██▌       | 1/4');
      const fin = await readCheckpoint(path.join(out, 'epoch_1_step_6'));
      expect(fin.config.aerie_sim).toMatchObject({ trained_steps: 6 });
    }, 90_000);
  }

  it('v0.2-resume: aerie plans --resume, the script prints what it found on every rank, skips the batches done and ends as an uninterrupted run', async () => {
    const plain = path.join(tmp, 'reference-late');
    // tp 2, batch 3: 2 steps an epoch, 4 in all, a save after each; two ranks print.
    const shape = { tpSize: 2, saveInterval: 1 };
    expect((await run(renderTrainArgv(launch(tmp, plain, shape)), rev('v0.2-resume'))).code).toBe(0);
    const reference = await readCheckpoint(path.join(plain, 'epoch_1_step_4'));

    const out = path.join(tmp, 'resume-late');
    const first = launch(tmp, out, { ...shape, profile: SPECFORGE_PROFILES['v0.2-resume'] });
    const crashed = await run(renderTrainArgv(first), { ...rev('v0.2-resume'), AERIE_SIM_TRAIN_CRASH_AT_STEP: '2' });
    expect(crashed.code).toBe(1);
    const plan = planTrainResume(
      first,
      rankCheckpoints(await listSegments(out))[0]!,
      parseTrainProgress(crashed.stderr).stepsPerEpoch,
    );
    if (plan.kind !== 'resume') throw new Error(`expected --resume, got ${plan.kind}`);
    expect(renderTrainArgv(plan.launch)).toContain('--resume');

    const cont = await run(renderTrainArgv(plan.launch), rev('v0.2-resume'));
    expect(cont.code, cont.stderr).toBe(0);
    expect(cont.stdout.match(/^Last checkpoint detected: .*$/gm)).toEqual([
      `Last checkpoint detected: ${out}/epoch_0_step_1`,
      `Last checkpoint detected: ${out}/epoch_0_step_1`,
    ]);
    expect(parseTrainProgress(cont.stdout + cont.stderr).startedFrom).toBe(`${out}/epoch_0_step_1`);
    expect(cont.stderr).not.toMatch(/Training Epoch 0: [^\r]*\| 1\/2 \[[^\]]*loss=/); // batch 1 of epoch 0 was skipped, not trained again
    expect((await fs.readdir(out)).sort()).toEqual([
      'epoch_0_step_1',
      'epoch_0_step_2',
      'epoch_1_step_3',
      'epoch_1_step_4',
    ]);
    const fin = await readCheckpoint(path.join(out, 'epoch_1_step_4'));
    expect(fin.config.aerie_sim).toMatchObject({ trained_steps: 4 });
    expect(fin.config).toEqual(reference.config);
    expect(existsSync(path.join(out, 'resume_step_1'))).toBe(false);
  }, 90_000);
});
