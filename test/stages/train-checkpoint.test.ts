import { TRAIN_HYPER } from '../support/train-hyper.js';
import { describe, expect, it } from 'vitest';
import { SPECFORGE_PROFILES } from '../../src/stages/common/specforge-revision.js';
import {
  dividingInterval,
  quarantineDir,
  latestCheckpoint,
  planTrainResume,
  rankCheckpoints,
  resumeSegmentDir,
  segmentBases,
} from '../../src/stages/train/v02-checkpoints.js';
import { type TrainLaunch } from '../../src/stages/train/launch.js';

describe('latestCheckpoint', () => {
  it('orders numerically, not as strings, and ignores temp dirs and junk', () => {
    const entries = [
      'epoch_0_step_40',
      'epoch_1_step_120',
      'epoch_0_step_80',
      'epoch_1_step_96',
      '.epoch_1_step_160.tmp-4242',
      'epoch_1_step_160.partial',
      'epoch_2',
      'runs',
      'resume_step_120',
      'training_state.pt',
    ];
    expect(latestCheckpoint(entries)).toEqual({ dir: 'epoch_1_step_120', epoch: 1, step: 120 });
  });

  it('returns the entry as given when it is a path, and null when nothing matches', () => {
    expect(latestCheckpoint(['/o/epoch_0_step_9', '/o/epoch_0_step_10/'])).toEqual({
      dir: '/o/epoch_0_step_10/',
      epoch: 0,
      step: 10,
    });
    expect(latestCheckpoint(['.epoch_0_step_3.tmp-1', 'logs'])).toBeNull();
    expect(latestCheckpoint([])).toBeNull();
  });
});

describe('continuation segments', () => {
  it('names a continuation by the steps already done and finds those names again', () => {
    expect(resumeSegmentDir('/runs/r1/train/out', 40)).toBe('/runs/r1/train/out/resume_step_40');
    expect(
      segmentBases(['epoch_0_step_40', 'resume_step_120', 'resume_step_40', 'resume_step_x', '.resume_step_9']),
    ).toEqual([40, 120]);
  });

  it('ranks checkpoints across segments by total steps, newest first', () => {
    const ranked = rankCheckpoints([
      { dir: '/o', baseStep: 0, entries: ['epoch_0_step_40', 'epoch_0_step_80', 'resume_step_80'] },
      { dir: '/o/resume_step_80', baseStep: 80, entries: ['epoch_0_step_40', '.epoch_0_step_80.tmp-7'] },
    ]);
    expect(ranked.map((c) => [c.dir, c.totalStep])).toEqual([
      ['/o/resume_step_80/epoch_0_step_40', 120],
      ['/o/epoch_0_step_80', 80],
      ['/o/epoch_0_step_40', 40],
    ]);
  });
});

/** A v0.2 launch as the driver plans it (both describe blocks plan from it). */
const original: TrainLaunch = {
  launcher: ['torchrun', 'scripts/train_eagle3.py'],
  targetModelPath: '/m',
  draftModelConfig: '/c.json',
  trainDataPath: '/d.jsonl',
  outputDir: '/o',
  ...TRAIN_HYPER,
  tpSize: 1,
  saveInterval: 40,
  extraArgs: [],
};

describe('planTrainResume', () => {
  it('starts fresh when there is no checkpoint', () => {
    expect(planTrainResume(original, null, 96)).toEqual({ kind: 'fresh', launch: original });
  });

  it("continues from a checkpoint loaded through the epoch_0 link (v0.2.0's --ckpt-dir is broken), the steps still owed, and its own output dir", () => {
    const [from] = rankCheckpoints([{ dir: '/o', baseStep: 0, entries: ['epoch_0_step_40', 'epoch_1_step_120'] }]);
    const plan = planTrainResume(original, from, 96);
    expect(plan).toEqual({
      kind: 'continue',
      from,
      stepsOwed: 72,
      launch: { ...original, resumeLink: '/o/epoch_1_step_120', maxNumSteps: 72, outputDir: '/o/resume_step_120' },
    });
  });

  it('is done when the newest checkpoint covers every planned step', () => {
    const [from] = rankCheckpoints([
      { dir: '/o', baseStep: 0, entries: ['epoch_1_step_120'] },
      { dir: '/o/resume_step_120', baseStep: 120, entries: ['epoch_0_step_40', 'epoch_0_step_72'] },
    ]);
    expect(planTrainResume(original, from, 96)).toEqual({ kind: 'done', finalCheckpoint: from });
    expect(from.totalStep).toBe(192);
  });

  it('needs the steps per epoch from the trainer log', () => {
    const [from] = rankCheckpoints([{ dir: '/o', baseStep: 0, entries: ['epoch_0_step_40'] }]);
    expect(() => planTrainResume(original, from, 0)).toThrow(/steps per epoch/);
  });
});

describe('planTrainResume by SpecForge revision', () => {
  const base = original;
  const resumable: TrainLaunch = { ...base, profile: SPECFORGE_PROFILES['v0.2-resume'] };
  const top = (...entries: string[]) => rankCheckpoints([{ dir: '/o', baseStep: 0, entries }])[0]!;

  it('where --resume works, a crash relaunches the same launch with --resume into the same output dir', () => {
    const from = top('epoch_0_step_40', 'epoch_1_step_120');
    expect(planTrainResume(resumable, from, 96)).toEqual({
      kind: 'resume',
      from,
      stepsOwed: 72,
      launch: { ...resumable, resume: true },
    });
  });

  it('where --resume works but the newest checkpoint is in an older continuation segment, keeps continuing that layout', () => {
    const [from] = rankCheckpoints([
      { dir: '/o', baseStep: 0, entries: ['epoch_0_step_40', 'resume_step_40'] },
      { dir: '/o/resume_step_40', baseStep: 40, entries: ['epoch_0_step_40'] },
    ]);
    const plan = planTrainResume(resumable, from!, 96);
    expect(plan.kind).toBe('continue');
    // --ckpt-dir works from 07959b44, so where --resume works it is the way into the old layout.
    expect(
      plan.kind === 'continue' && [
        plan.launch.resumeFrom,
        plan.launch.outputDir,
        plan.launch.maxNumSteps,
        plan.launch.resume,
      ],
    ).toEqual(['/o/resume_step_40/epoch_0_step_40', '/o/resume_step_80', 112, undefined]);
  });

  it('where --resume works, resumes even without the steps-per-epoch figure (the script sizes itself)', () => {
    const from = top('epoch_0_step_40');
    expect(planTrainResume(resumable, from, undefined).kind).toBe('resume');
    expect(planTrainResume(base, from, undefined)).toEqual({ kind: 'fresh', launch: base });
  });

  it('v0.2.0, clean exit: the newest checkpoint is the drafter, with a note naming the steps lost and the save-interval that keeps them', () => {
    // 192 steps, saves every 40: the last save is step 160; steps 161-192 were trained and lost.
    const from = top('epoch_1_step_160', 'epoch_1_step_120');
    const plan = planTrainResume(base, from, 96, true);
    expect(plan).toMatchObject({ kind: 'done', finalCheckpoint: { dir: '/o/epoch_1_step_160' } });
    expect(plan.kind === 'done' && plan.note).toMatch(
      /saves only every save-interval \(40\) steps and has no final save: the last 32 of 192 steps were trained but not saved.*step 160's checkpoint; set stages\.train\.save-interval to a divisor of 192 \(e\.g\. 32\)/,
    );
  });

  it('v0.2.0, clean exit of a run shorter than one save interval: runs it again as planned, saving at its last step', () => {
    const plan = planTrainResume({ ...base, saveInterval: 5000 }, null, 96, true);
    expect(plan.kind).toBe('fresh');
    expect(plan.kind === 'fresh' && [plan.launch.saveInterval, plan.launch.maxNumSteps, plan.note]).toEqual([
      192,
      undefined,
      expect.stringMatching(/left no checkpoint/),
    ]);
  });

  it('suggests the largest save-interval not above the configured one whose last save is the last step', () => {
    expect([
      dividingInterval(192, 40),
      dividingInterval(192, 500),
      dividingInterval(97, 40),
      dividingInterval(8, 3),
    ]).toEqual([32, 192, 1, 2]);
  });

  it('a clean exit short by a whole interval or more, or on a revision with a final save, is short: nothing a relaunch fixes', () => {
    expect(planTrainResume(base, top('epoch_0_step_80'), 96, true)).toMatchObject({ kind: 'short', stepsOwed: 112 });
    const finalSave = { ...base, profile: SPECFORGE_PROFILES['v0.2-final-save'] };
    expect(planTrainResume(finalSave, top('epoch_1_step_160'), 96, true)).toMatchObject({
      kind: 'short',
      stepsOwed: 32,
    });
    expect(planTrainResume(resumable, null, 96, true)).toMatchObject({ kind: 'short', from: null });
    expect(planTrainResume(base, top('epoch_1_step_192'), 96, true)).toMatchObject({ kind: 'done' });
  });

  it('names a damaged checkpoint out of the pattern --resume matches', () => {
    const aside = quarantineDir('/o/epoch_1_step_160/', 7);
    expect(aside).toBe('/o/epoch_1_step_160.incomplete-7');
    expect(/^epoch_(\d+)(?:_step_(\d+))?$/.test(aside.split('/').pop()!)).toBe(false);
    expect(latestCheckpoint([aside])).toBeNull();
  });
});
