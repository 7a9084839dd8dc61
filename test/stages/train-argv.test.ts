import { TRAIN_HYPER } from '../support/train-hyper.js';
import { describe, expect, it } from 'vitest';
import { SPECFORGE_PROFILES } from '../../src/stages/common/specforge-revision.js';
import { renderTrainArgv } from '../../src/stages/train/v02-argv.js';
import { TrainLaunchError, type TrainLaunch } from '../../src/stages/train/launch.js';

const base: TrainLaunch = {
  launcher: ['torchrun', '--standalone', '--nproc_per_node', '8', '/opt/SpecForge/scripts/train_eagle3.py'],
  targetModelPath: '/models/llama-8b',
  draftModelConfig: '/cfg/llama3-8B-eagle3.json',
  trainDataPath: '/runs/r1/generate/regen.jsonl',
  outputDir: '/runs/r1/train/out',
  ...TRAIN_HYPER,
  tpSize: 1,
  saveInterval: 500,
  extraArgs: [],
};

describe('renderTrainArgv', () => {
  it('renders a fresh online launch: launcher, then the v0.2 flags, output dir last', () => {
    expect(renderTrainArgv(base)).toEqual([
      'torchrun',
      '--standalone',
      '--nproc_per_node',
      '8',
      '/opt/SpecForge/scripts/train_eagle3.py',
      '--target-model-path',
      '/models/llama-8b',
      '--draft-model-config',
      '/cfg/llama3-8B-eagle3.json',
      '--train-data-path',
      '/runs/r1/generate/regen.jsonl',
      '--chat-template',
      'llama3',
      '--max-length',
      '2048',
      '--num-epochs',
      '2',
      '--batch-size',
      '1',
      '--learning-rate',
      '0.0001',
      '--ttt-length',
      '7',
      '--tp-size',
      '1',
      '--save-interval',
      '500',
      '--output-dir',
      '/runs/r1/train/out',
    ]);
  });

  it('renders an offline continuation: hidden states, --ckpt-dir, --max-num-steps, extra args at the end', () => {
    const argv = renderTrainArgv({
      ...base,
      hiddenStatesPath: '/runs/r1/extract/hs',
      resumeFrom: '/runs/r1/train/out/epoch_0_step_40',
      maxNumSteps: 152,
      outputDir: '/runs/r1/train/out/resume_step_40',
      learningRate: 1e-7,
      extraArgs: ['--dist-timeout', '60'],
    });
    expect(argv.slice(5)).toEqual([
      '--target-model-path',
      '/models/llama-8b',
      '--draft-model-config',
      '/cfg/llama3-8B-eagle3.json',
      '--train-data-path',
      '/runs/r1/generate/regen.jsonl',
      '--train-hidden-states-path',
      '/runs/r1/extract/hs',
      '--chat-template',
      'llama3',
      '--max-length',
      '2048',
      '--num-epochs',
      '2',
      '--batch-size',
      '1',
      '--learning-rate',
      '1e-7',
      '--ttt-length',
      '7',
      '--tp-size',
      '1',
      '--save-interval',
      '500',
      '--ckpt-dir',
      '/runs/r1/train/out/epoch_0_step_40',
      '--max-num-steps',
      '152',
      '--output-dir',
      '/runs/r1/train/out/resume_step_40',
      '--dist-timeout',
      '60',
    ]);
  });

  it('refuses --resume in extra args, explaining that v0.2 silently starts over', () => {
    expect(() => renderTrainArgv({ ...base, extraArgs: ['--resume'] })).toThrow(/silently starts over/);
    expect(() => renderTrainArgv({ ...base, extraArgs: ['--resume'] })).toThrow(TrainLaunchError);
  });

  it('refuses extra args that would override a flag aerie sets, including argparse abbreviations', () => {
    expect(() => renderTrainArgv({ ...base, extraArgs: ['--output-dir', '/x'] })).toThrow(/sets --output-dir/);
    expect(() => renderTrainArgv({ ...base, extraArgs: ['--num-ep=3'] })).toThrow(/sets --num-epochs/);
    expect(() => renderTrainArgv({ ...base, extraArgs: ['--ckpt', '/x'] })).toThrow(/sets --ckpt-dir/);
    expect(renderTrainArgv({ ...base, extraArgs: ['--max-grad-norm', '1.0', '--seed', '3'] }).slice(-4)).toEqual([
      '--max-grad-norm',
      '1.0',
      '--seed',
      '3',
    ]);
  });

  it('refuses numbers train_eagle3.py would reject or misread', () => {
    expect(() => renderTrainArgv({ ...base, batchSize: 1.5 })).toThrow(/batchSize must be an integer/);
    expect(() => renderTrainArgv({ ...base, learningRate: 0 })).toThrow(/learningRate must be a positive number/);
    expect(() => renderTrainArgv({ ...base, maxNumSteps: 0 })).toThrow(/maxNumSteps/);
    expect(() => renderTrainArgv({ ...base, launcher: [] })).toThrow(/launcher is empty/);
  });
});

describe('renderTrainArgv by SpecForge revision', () => {
  const on = (id: keyof typeof SPECFORGE_PROFILES, over: Partial<TrainLaunch> = {}): TrainLaunch => ({
    ...base,
    profile: SPECFORGE_PROFILES[id],
    ...over,
  });

  it('refuses --resume in extra-args where it is broken (v0.2.0, 03a3dedb…), naming the revision', () => {
    for (const id of ['v0.2.0', 'v0.2-final-save'] as const) {
      expect(() => renderTrainArgv(on(id, { extraArgs: ['--resume'] }))).toThrow(
        /remove --resume.*epoch_N directories/,
      );
      expect(() => renderTrainArgv(on(id, { extraArgs: ['--resu'] }))).toThrow(
        `On ${SPECFORGE_PROFILES[id].label} --resume`,
      );
    }
  });

  it('where --resume works, accepts it in extra-args and renders it once when aerie resumes too', () => {
    expect(
      renderTrainArgv(on('v0.2-resume', { extraArgs: ['--resume'] })).filter((a) => a === '--resume'),
    ).toHaveLength(1);
    const argv = renderTrainArgv(on('v0.2-resume', { resume: true }));
    expect(argv.filter((a) => a === '--resume')).toHaveLength(1);
    expect(argv).not.toContain('--ckpt-dir');
    expect(argv.slice(argv.indexOf('--output-dir'), argv.indexOf('--output-dir') + 2)).toEqual([
      '--output-dir',
      base.outputDir,
    ]);
    expect(
      renderTrainArgv(on('v0.2-resume', { resume: true, extraArgs: ['--resume'] })).filter((a) => a === '--resume'),
    ).toHaveLength(1);
  });

  it('never renders --resume where it does not resume, and is v0.2.0 when no profile is given', () => {
    expect(() => renderTrainArgv(on('v0.2.0', { resume: true }))).toThrow(
      /--resume does not resume on SpecForge v0.2.0/,
    );
    expect(() => renderTrainArgv({ ...base, resume: true })).toThrow(TrainLaunchError);
  });

  it('refuses the CLI revision: it has no scripts/train_eagle3.py, and says which driver to use', () => {
    expect(() => renderTrainArgv(on('cli'))).toThrow(/set stages\.train\.driver: specforge/);
  });
});
