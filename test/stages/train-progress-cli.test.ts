import { describe, expect, it } from 'vitest';
import {
  parsePythonMetricDict,
  parseSpecforgeProgress,
  specforgeStopStep,
  type CliTrainProgress,
} from '../../src/stages/train/specforge-progress.js';

// Lines built as HEAD builds them: the dict in _reduce_eagle3_metrics' key order
// (SpecForge@a6b6b023:specforge/training/controller.py:283-303,471-473, then lr and perf/* at
// controller.py:683-720), printed by f"step {step}: {printable}" (assembly.py:291) — generated
// with CPython's own dict repr, three TTT positions.
const STEP8 =
  "step 8: {'acc_0': 0.4375, 'acc_1': 0.3125, 'acc_2': 0.25, 'ploss_0': 5.123456789, 'ploss_1': 5.5, 'ploss_2': 6.0, 'acc': 0.3333333333333333, 'loss': 16.623456789, 'acceptance_rate_0': 0.5, 'acceptance_rate_1': 0.375, 'acceptance_rate_2': 0.25, 'acceptance_rate': 0.375, 'grad_norm': 3.0625, 'lr': 9.5e-05, 'perf/optimizer_steps_per_hour': 7200.0, 'perf/optimizer_step_time_s': 0.5, 'perf/data_wait_time_s': 0.0012, 'perf/train_compute_time_s': 0.48, 'perf/durable_ack_time_s': 0.0, 'perf/global_samples_per_second': 16.0}\n";
// The same metrics through a tracker (tracking.py:56-66 prefixes train/; tracking.py:92 prints).
const STEP8_TRACKED =
  "step 8: {'train/acc_0': 0.4375, 'train/acc_1': 0.3125, 'train/acc_2': 0.25, 'train/ploss_0': 5.123456789, 'train/ploss_1': 5.5, 'train/ploss_2': 6.0, 'train/acc': 0.3333333333333333, 'train/loss': 16.623456789, 'train/acceptance_rate_0': 0.5, 'train/acceptance_rate_1': 0.375, 'train/acceptance_rate_2': 0.25, 'train/acceptance_rate': 0.375, 'train/grad_norm': 3.0625, 'train/lr': 9.5e-05, 'train/perf/optimizer_steps_per_hour': 7200.0, 'train/perf/optimizer_step_time_s': 0.5, 'train/perf/data_wait_time_s': 0.0012, 'train/perf/train_compute_time_s': 0.48, 'train/perf/durable_ack_time_s': 0.0, 'train/perf/global_samples_per_second': 16.0}\n";
// An eval pass at the same step (controller.py:729-735; evaluator.py:146-149 keys).
const EVAL8 =
  "step 8: {'eval/avg_loss': 17.0, 'eval/avg_acc': 0.4, 'eval/per_position_acc': [0.4, 0.3, 0.2], 'eval/simulated_acc_len': 1.7}\n";
// Python's last-resort handler prints the bare message (checkpoint.py:114-118).
const REWIND = 'rewinding checkpoint timeline at step 4: deleting /o/demo-step4, /o/demo-step8\n';

const stable = (p: CliTrainProgress): Omit<CliTrainProgress, 'partial'> => {
  const { partial: _p, ...rest } = p;
  return rest;
};

describe('parseSpecforgeProgress', () => {
  it('reads step, loss, pooled acc, lr, grad_norm and acceptance rate from the dict line', () => {
    expect(stable(parseSpecforgeProgress('Set draft model tie_word_embeddings to False\n' + STEP8))).toEqual({
      lines: 2,
      step: 8,
      loss: 16.623456789,
      acc: 0.3333333333333333,
      lr: 9.5e-5,
      gradNorm: 3.0625,
      acceptanceRate: 0.375,
    });
  });

  it('reads the train/-prefixed keys a tracker prints the same way', () => {
    expect(stable(parseSpecforgeProgress(STEP8_TRACKED))).toEqual(stable(parseSpecforgeProgress(STEP8)));
  });

  it('keeps the training values when an eval line follows at the same step', () => {
    const p = parseSpecforgeProgress(STEP8 + EVAL8);
    expect(p.loss).toBe(16.623456789);
    expect(p.acc).toBe(0.3333333333333333);
    expect(p.step).toBe(8);
  });

  it('does not read the rewind warning as a step; it surfaces it as a note', () => {
    const p = parseSpecforgeProgress(STEP8 + REWIND);
    expect(p.step).toBe(8);
    expect(p.rewound).toBe('rewinding checkpoint timeline at step 4: deleting /o/demo-step4, /o/demo-step8');
  });

  it('finds the rewind message behind a logging prefix too', () => {
    const p = parseSpecforgeProgress(`WARNING:specforge.training.checkpoint:${REWIND}`);
    expect(p.step).toBeUndefined();
    expect(p.rewound).toMatch(/^rewinding checkpoint timeline at step 4/);
  });

  it('gives the same result however the log is split into chunks', () => {
    const log = STEP8 + REWIND + STEP8.replace('step 8', 'step 12').replace("'loss': 16.623456789", "'loss': 12.5");
    const whole = stable(parseSpecforgeProgress(log));
    for (const size of [1, 7, 50, 333]) {
      let p: CliTrainProgress | undefined;
      for (let i = 0; i < log.length; i += size) p = parseSpecforgeProgress(log.slice(i, i + size), p);
      expect(stable(p!)).toEqual(whole);
      expect(p!.partial).toBeUndefined();
    }
    expect(whole.step).toBe(12);
    expect(whole.loss).toBe(12.5);
  });

  it('ignores a dict line until its newline arrives', () => {
    const p = parseSpecforgeProgress(STEP8.slice(0, -1));
    expect(p.step).toBeUndefined();
    expect(p.partial).toBe(STEP8.slice(0, -1));
    expect(parseSpecforgeProgress('\n', p).loss).toBe(16.623456789);
  });

  it('keeps a caller-supplied total (HEAD prints none without a TTY)', () => {
    expect(parseSpecforgeProgress(STEP8, { lines: 0, totalSteps: 16 }).totalSteps).toBe(16);
  });

  it('reads step and total from the TTY meter (controller.py:585-592: desc Training, unit step)', () => {
    const meter = '\rTraining:  50%|█████     | 8/16 [00:04<00:04,  1.99step/s]';
    const p = parseSpecforgeProgress(meter + '\rTraining:  56%|█████▋    | 9/16 [00:04<00:03,  2.01step/s]');
    expect(p.step).toBe(9);
    expect(p.totalSteps).toBe(16);
    const q = parseSpecforgeProgress(meter + STEP8);
    expect(q.loss).toBe(16.623456789);
  });

  it('reads nan and inf as Python prints them', () => {
    const p = parseSpecforgeProgress("step 1: {'loss': nan, 'acc': 0.0, 'lr': 1e-05, 'grad_norm': inf}\n");
    expect(p.loss).toBeNaN();
    expect(p.gradNorm).toBe(Infinity);
    expect(p.acc).toBe(0);
  });

  it('averages positional accuracies when the pooled key is absent', () => {
    expect(parseSpecforgeProgress("step 3: {'acc_0': 0.5, 'acc_1': 0.25, 'loss': 2.0}\n").acc).toBe(0.375);
  });

  it('parses lists in the dict', () => {
    expect(parsePythonMetricDict("'eval/per_position_acc': [0.4, 0.3, 0.2], 'eval/avg_acc': 0.4")).toEqual({
      'eval/per_position_acc': [0.4, 0.3, 0.2],
      'eval/avg_acc': 0.4,
    });
  });
});

describe('parseSpecforgeProgress with several ranks in one log', () => {
  const dict = (step: number, loss: number) =>
    `step ${step}: {'acc': 0.5, 'loss': ${loss}, 'lr': 1e-05, 'perf/optimizer_step_time_s': 0.${step}}`;
  it('reads two ranks’ prints that ran together before their newlines (test/fixtures/real/specforge-a6b6b023-cpu-ws2/resume.log)', () => {
    const p = parseSpecforgeProgress(`${dict(6, 1.5)}\n${dict(6, 1.5)}\n${dict(7, 1.25)}${dict(7, 1.25)}\n\n`);
    expect(p).toMatchObject({ step: 7, loss: 1.25, acc: 0.5, lr: 1e-5 });
  });
  it('reads a dict that another rank’s traceback line followed on the same line', () => {
    const p = parseSpecforgeProgress(`${dict(3, 2)}[rank1]: Traceback (most recent call last):\n`);
    expect(p).toMatchObject({ step: 3, loss: 2 });
  });
});

describe('specforgeStopStep', () => {
  it('is the data steps: samples padded per DP rank, partial batches dropped, accumulation over epochs', () => {
    // 17 files on 2 ranks: 9 each (padded), batch 2 → 4 micro-batches × 3 epochs / accumulation 2 = 6.
    expect(specforgeStopStep({ samples: 17, worldSize: 2, batchSize: 2, accumulationSteps: 2, numEpochs: 3 })).toBe(6);
    expect(specforgeStopStep({ samples: 16, worldSize: 1, batchSize: 1, accumulationSteps: 1, numEpochs: 1 })).toBe(16);
  });
  it('is capped by max_steps, and max_steps past the data stops at the data', () => {
    expect(
      specforgeStopStep({ samples: 16, worldSize: 1, batchSize: 1, accumulationSteps: 1, numEpochs: 2, maxSteps: 10 }),
    ).toBe(10);
    expect(
      specforgeStopStep({ samples: 16, worldSize: 1, batchSize: 1, accumulationSteps: 1, numEpochs: 1, maxSteps: 100 }),
    ).toBe(16);
  });
});
