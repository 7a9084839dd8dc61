import { describe, expect, it } from 'vitest';
import {
  latestCheckpoint,
  planTrainResume,
  rankCheckpoints,
  resumeSegmentDir,
  segmentBases,
  type TrainLaunch,
} from '../../src/stages/train.js';

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
    expect(latestCheckpoint(['/o/epoch_0_step_9', '/o/epoch_0_step_10/'])).toEqual({ dir: '/o/epoch_0_step_10/', epoch: 0, step: 10 });
    expect(latestCheckpoint(['.epoch_0_step_3.tmp-1', 'logs'])).toBeNull();
    expect(latestCheckpoint([])).toBeNull();
  });
});

describe('continuation segments', () => {
  it('names a continuation by the steps already done and finds those names again', () => {
    expect(resumeSegmentDir('/runs/r1/train/out', 40)).toBe('/runs/r1/train/out/resume_step_40');
    expect(segmentBases(['epoch_0_step_40', 'resume_step_120', 'resume_step_40', 'resume_step_x', '.resume_step_9'])).toEqual([40, 120]);
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

describe('planTrainResume', () => {
  const original: TrainLaunch = {
    launcher: ['torchrun', 'scripts/train_eagle3.py'],
    targetModelPath: '/m',
    draftModelConfig: '/c.json',
    trainDataPath: '/d.jsonl',
    outputDir: '/o',
    chatTemplate: 'llama3',
    maxLength: 2048,
    numEpochs: 2,
    batchSize: 1,
    learningRate: 1e-4,
    tttLength: 7,
    tpSize: 1,
    saveInterval: 40,
    extraArgs: [],
  };

  it('starts fresh when there is no checkpoint', () => {
    expect(planTrainResume(original, null, 96)).toEqual({ kind: 'fresh', launch: original });
  });

  it('continues from a checkpoint with --ckpt-dir, the steps still owed, and its own output dir', () => {
    const [from] = rankCheckpoints([{ dir: '/o', baseStep: 0, entries: ['epoch_0_step_40', 'epoch_1_step_120'] }]);
    const plan = planTrainResume(original, from, 96);
    expect(plan).toEqual({
      kind: 'continue',
      from,
      stepsOwed: 72,
      launch: { ...original, resumeFrom: '/o/epoch_1_step_120', maxNumSteps: 72, outputDir: '/o/resume_step_120' },
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
