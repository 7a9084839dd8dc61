/**
 * The pure parts of the specforge and command drivers: what they render and what they refuse,
 * and the progress read from logs that are not v0.2's.
 */
import { describe, expect, it } from 'vitest';
import { commandCheckpoints, fillTemplate, renderCommandArgv, type CommandValues } from '../../src/stages/train-command.js';
import { parseGenericProgress } from '../../src/stages/train-progress.js';
import { specforgeCheckpoints, specforgeConfig, type SpecforgeRun } from '../../src/stages/train-specforge.js';
import { TrainLaunchError } from '../../src/stages/train.js';

const run: SpecforgeRun = {
  launcher: ['specforge'],
  configPath: '/r/train/specforge.yaml',
  runId: 'x',
  outputDir: '/r/train/output',
  targetModelPath: '/m',
  draftModelConfig: '/d.json',
  targetBackend: 'sglang',
  trainDataPath: '/r/data/train.jsonl',
  chatTemplate: 'llama3',
  maxLength: 2048,
  numEpochs: 1,
  batchSize: 1,
  learningRate: 1e-4,
  tttLength: 7,
  saveInterval: 100,
  overrides: {},
};

const values: CommandValues = { target_model: '/m', draft_model_config: '/d.json', train_data: '/t.jsonl', hidden_states_layout: 'none', output_dir: '/o', run_dir: '/r' };

describe('specforge driver', () => {
  it('uses exactly one data source: the conversations online, the hidden states offline', () => {
    expect(specforgeConfig(run).data).toEqual({ train_data_path: '/r/data/train.jsonl', max_length: 2048, chat_template: 'llama3' });
    expect(specforgeConfig({ ...run, hiddenStatesPath: '/r/hs' }).data).toEqual({ hidden_states_path: '/r/hs', max_length: 2048, chat_template: 'llama3' });
  });

  it('merges dotted overrides and refuses one that would move data, checkpoints or resume', () => {
    expect(specforgeConfig({ ...run, overrides: { 'training.warmup_ratio': 0.02, 'deployment.trainer.nproc_per_node': 8 } })).toMatchObject({
      training: { warmup_ratio: 0.02 },
      deployment: { trainer: { nproc_per_node: 8 } },
    });
    for (const key of ['output_dir', 'training.resume_from', 'data.hidden_states_path']) {
      expect(() => specforgeConfig({ ...run, overrides: { [key]: 'x' } })).toThrow(TrainLaunchError);
    }
  });

  it('finds <run>-step<N> checkpoints newest first, ignoring the -latest link, temp dirs and other runs', () => {
    expect(specforgeCheckpoints('/o', 'x', ['x-step10', 'x-latest', 'x-step9', '.x-step11.tmp-1', 'y-step50', 'x-step2a'])).toEqual([
      { dir: '/o/x-step10', step: 10 },
      { dir: '/o/x-step9', step: 9 },
    ]);
  });
});

describe('command driver', () => {
  it('fills placeholders anywhere in an element and appends resume-args with {checkpoint}', () => {
    expect(renderCommandArgv({ launcher: ['t', '--out={output_dir}/x', '{train_data}'], resumeArgs: ['--resume', '{checkpoint}'], drafterDir: '{output_dir}' }, { ...values, checkpoint: '/o/ckpt-3' })).toEqual([
      't', '--out=/o/x', '/t.jsonl', '--resume', '/o/ckpt-3',
    ]);
  });

  it('refuses an unknown placeholder and hidden states the extract stage did not produce', () => {
    expect(() => fillTemplate('{data}', values, 'stages.train.launcher')).toThrow(/unknown placeholder \{data\}/);
    expect(() => fillTemplate('{hidden_states}', values, 'stages.train.launcher')).toThrow(/extract stage produced no hidden states/);
  });

  it('orders checkpoints by the pattern\'s step group', () => {
    expect(commandCheckpoints('/o', '^checkpoint-(\\d+)$', ['checkpoint-20', 'checkpoint-3', 'final', 'checkpoint-x'])).toEqual([
      { dir: '/o/checkpoint-20', step: 20 },
      { dir: '/o/checkpoint-3', step: 3 },
    ]);
    expect(commandCheckpoints('/o', undefined, ['checkpoint-1'])).toEqual([]);
  });
});

describe('parseGenericProgress', () => {
  it('reads tqdm meters with key=value postfixes, across chunk boundaries', () => {
    let p = parseGenericProgress('[specforge] run\n\rTraining:  10%|█         | 1/10 [00:00<00:09, 1.00it/s, epoch=0, loss=9.34, acc=0.11]\rTraining:  20%|██    ');
    expect(p).toMatchObject({ step: 1, totalSteps: 10, epoch: 0, loss: 9.34, acc: 0.11 });
    p = parseGenericProgress('    | 2/10 [00:01<00:08, 1.00it/s, epoch=0, loss=9.27, acc=0.12]', p);
    expect(p).toMatchObject({ step: 2, loss: 9.27, acc: 0.12 });
  });

  it('reads logging lines and saved checkpoints', () => {
    const p = parseGenericProgress('step 50/192 epoch 1 | train/loss=4.3100 train/acc=0.3700 train/lr=0.0001\nSaved checkpoint /o/x-step50\n');
    expect(p).toMatchObject({ step: 50, totalSteps: 192, epoch: 1, loss: 4.31, acc: 0.37, lastCheckpoint: '/o/x-step50', lines: 2 });
  });
});
