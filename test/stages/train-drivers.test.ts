/**
 * The pure parts of the specforge and command drivers: what they render and what they refuse,
 * and the progress read from logs that are not v0.2's.
 */
import { describe, expect, it } from 'vitest';
import {
  commandCheckpoints,
  fillTemplate,
  renderCommandArgv,
  type CommandValues,
} from '../../src/stages/train/command.js';
import { parseGenericProgress } from '../../src/stages/train/progress.js';
import {
  renderSpecforgeExportArgv,
  renderSpecforgeTrainArgv,
  specforgeConfig,
  type SpecforgeRun,
} from '../../src/stages/train/specforge-config.js';
import { classifySpecforgeFailure } from '../../src/stages/train/specforge-run.js';
import { TrainLaunchError } from '../../src/stages/train/launch.js';

const run: SpecforgeRun = {
  launcher: ['specforge'],
  configPath: '/r/train/specforge.yaml',
  runId: 'x',
  outputDir: '/r/train/output',
  targetModelPath: '/m',
  draftModelConfig: '/d.json',
  targetBackend: 'sglang',
  trainDataPath: '/r/data/train.jsonl',
  hiddenStatesPath: '/r/hs',
  chatTemplate: 'llama3',
  maxLength: 2048,
  numEpochs: 1,
  batchSize: 1,
  learningRate: 1e-4,
  tttLength: 7,
  saveInterval: 100,
  overrides: {},
};

const values: CommandValues = {
  target_model: '/m',
  draft_model_config: '/d.json',
  train_data: '/t.jsonl',
  hidden_states_layout: 'none',
  output_dir: '/o',
  run_dir: '/r',
};

describe('specforge driver', () => {
  it('uses exactly one data source, the hidden states, and refuses online training (D1)', () => {
    expect(specforgeConfig(run).data).toEqual({
      hidden_states_path: '/r/hs',
      max_length: 2048,
      chat_template: 'llama3',
    });
    // SpecForge@a6b6b023:specforge/config/schema.py:706-710 rejects colocated online training.
    expect(() => specforgeConfig({ ...run, hiddenStatesPath: undefined })).toThrow(
      /trains offline only.*stages\.extract\.driver: specforge-offline/,
    );
  });

  it("passes the prepare step's vocab mapping to train and to export (D9), and nothing when there is none", () => {
    const withMap = { ...run, vocabMappingPath: '/r/hs/vocab_mapping/vocab_mapping.pt' };
    expect(specforgeConfig(withMap).model).toMatchObject({
      vocab_mapping_path: '/r/hs/vocab_mapping/vocab_mapping.pt',
    });
    expect(renderSpecforgeExportArgv(withMap, '/r/o/x-step9', '/r/d')).toEqual([
      'specforge',
      'export',
      '--to',
      'sglang',
      '--checkpoint',
      '/r/o/x-step9',
      '--draft-config',
      '/d.json',
      '--output-dir',
      '/r/d',
      '--vocab-mapping',
      '/r/hs/vocab_mapping/vocab_mapping.pt',
    ]);
    expect(specforgeConfig(run).model).not.toHaveProperty('vocab_mapping_path');
    expect(renderSpecforgeExportArgv(run, '/r/o/x-step9', '/r/d')).not.toContain('--vocab-mapping');
  });

  it('resumes with a dotted training.resume_from override, leaving the config file as the first launch wrote it', () => {
    expect(renderSpecforgeTrainArgv(run, '/r/train/output/x-step40')).toEqual([
      'specforge',
      'train',
      '-c',
      '/r/train/specforge.yaml',
      'training.resume_from=/r/train/output/x-step40',
    ]);
    expect(renderSpecforgeTrainArgv(run)).toEqual(['specforge', 'train', '-c', '/r/train/specforge.yaml']);
  });

  it('merges dotted overrides and refuses one that would move data, checkpoints or resume', () => {
    expect(
      specforgeConfig({ ...run, overrides: { 'training.warmup_ratio': 0.02, 'deployment.trainer.nproc_per_node': 8 } }),
    ).toMatchObject({
      training: { warmup_ratio: 0.02 },
      deployment: { trainer: { nproc_per_node: 8 } },
    });
    for (const key of [
      'output_dir',
      'training.resume_from',
      'data.hidden_states_path',
      'data.train_data_path',
      'model.vocab_mapping_path',
      'model.target_backend',
    ]) {
      expect(() => specforgeConfig({ ...run, overrides: { [key]: 'x' } })).toThrow(TrainLaunchError);
    }
    // Online mode cannot come in through the overrides either (D1).
    for (const key of ['deployment.mode', 'deployment.disaggregated.backend', 'training.role']) {
      expect(() => specforgeConfig({ ...run, overrides: { [key]: 'disaggregated' } })).toThrow(
        /disaggregated online deployment, which aerie does not drive/,
      );
    }
  });
});

describe('specforge driver failures', () => {
  it('a resume refused for another world size is not retried, and says how to fix it', () => {
    // The message of SpecForge@a6b6b023:specforge/training/checkpoint.py:313-318.
    const tail =
      '[rank0]: ValueError: checkpoint /r/o/x-step40 has no usable per-rank state for rank 0 at world_size=4 (written at world_size=8): ' +
      "resuming training needs each rank's optimizer/RNG shard — resume at the original world size, or pass require_full_state=False to restore weights and counters only\n";
    const f = classifySpecforgeFailure(tail);
    expect(f).toMatchObject({ kind: 'usage', retryable: false });
    expect(f.advice).toMatch(
      /written at world_size=8 with world_size=4.*Fix: launch with the original number of processes/,
    );
  });

  it('a config SpecForge refuses is not retried; a plain crash is', () => {
    expect(
      classifySpecforgeFailure(
        'pydantic_core._pydantic_core.ValidationError: 1 validation error for Config\nmodel.target_backend\n',
      ).retryable,
    ).toBe(false);
    expect(classifySpecforgeFailure("ValueError: override path 'training.nope' does not exist\n").retryable).toBe(
      false,
    );
    expect(classifySpecforgeFailure('Traceback (most recent call last):\nRuntimeError: NCCL error\n').retryable).toBe(
      true,
    );
  });
});

describe('command driver', () => {
  it('fills placeholders anywhere in an element and appends resume-args with {checkpoint}', () => {
    expect(
      renderCommandArgv(
        {
          launcher: ['t', '--out={output_dir}/x', '{train_data}'],
          resumeArgs: ['--resume', '{checkpoint}'],
          drafterDir: '{output_dir}',
        },
        { ...values, checkpoint: '/o/ckpt-3' },
      ),
    ).toEqual(['t', '--out=/o/x', '/t.jsonl', '--resume', '/o/ckpt-3']);
  });

  it('refuses an unknown placeholder and hidden states the extract stage did not produce', () => {
    expect(() => fillTemplate('{data}', values, 'stages.train.launcher')).toThrow(/unknown placeholder \{data\}/);
    expect(() => fillTemplate('{hidden_states}', values, 'stages.train.launcher')).toThrow(
      /extract stage produced no hidden states/,
    );
  });

  it("orders checkpoints by the pattern's step group", () => {
    expect(
      commandCheckpoints('/o', '^checkpoint-(\\d+)$', ['checkpoint-20', 'checkpoint-3', 'final', 'checkpoint-x']),
    ).toEqual([
      { dir: '/o/checkpoint-20', step: 20 },
      { dir: '/o/checkpoint-3', step: 3 },
    ]);
    expect(commandCheckpoints('/o', undefined, ['checkpoint-1'])).toEqual([]);
  });
});

describe('parseGenericProgress', () => {
  it('reads tqdm meters with key=value postfixes, across chunk boundaries', () => {
    let p = parseGenericProgress(
      '[specforge] run\n\rTraining:  10%|█         | 1/10 [00:00<00:09, 1.00it/s, epoch=0, loss=9.34, acc=0.11]\rTraining:  20%|██    ',
    );
    expect(p).toMatchObject({ step: 1, totalSteps: 10, epoch: 0, loss: 9.34, acc: 0.11 });
    p = parseGenericProgress('    | 2/10 [00:01<00:08, 1.00it/s, epoch=0, loss=9.27, acc=0.12]', p);
    expect(p).toMatchObject({ step: 2, loss: 9.27, acc: 0.12 });
  });

  it('reads logging lines and saved checkpoints', () => {
    const p = parseGenericProgress(
      'step 50/192 epoch 1 | train/loss=4.3100 train/acc=0.3700 train/lr=0.0001\nSaved checkpoint /o/x-step50\n',
    );
    expect(p).toMatchObject({
      step: 50,
      totalSteps: 192,
      epoch: 1,
      loss: 4.31,
      acc: 0.37,
      lastCheckpoint: '/o/x-step50',
      lines: 2,
    });
  });
});
