import { describe, expect, it } from 'vitest';
import { parseTrainProgress, type TrainProgress } from '../../src/stages/train.js';

const meter = (e: number, n: number, total: number, post = ''): string =>
  `\rTraining Epoch ${e}: ${String(Math.round((100 * n) / total)).padStart(3)}%|█▏        | ${n}/${total} [00:20<00:28,  1.99it/s${post}]`;

/** A SpecForge v0.2 log as a merged stdout+stderr file shows it. */
const LOG =
  '\n -----------【args】-----------\n' +
  'target_model_path                      ···· /models/llama-8b\n' +
  'num_epochs                             ··· 2\n' +
  'max_num_steps                          ···· None\n' +
  'rank 0: Initialized distributed environment\n' +
  'rank 0: Loaded vocab mapping\n' +
  'rank 0: Auto-calculated total_steps: 192 (num_epochs=2 * steps_per_epoch=96)\n' +
  'Starting training from epoch 0\n' +
  meter(0, 0, 96) +
  meter(0, 1, 96, ', loss=9.41, acc=0.08, time=0.50s') +
  meter(0, 40, 96, ', loss=6.02, acc=0.31, time=0.50s') +
  'Saved full training state to /o/epoch_0_step_40/training_state.pt\n' +
  'Saved model configuration to /o/epoch_0_step_40\n' +
  meter(0, 41, 96, ', loss=5.98, acc=0.32, time=2.51s');

const stable = (p: TrainProgress): Omit<TrainProgress, 'partial'> => {
  const { partial: _p, ...rest } = p;
  return rest;
};

describe('parseTrainProgress', () => {
  it('reads epoch, step, totals, loss, acc and the last checkpoint from a log', () => {
    expect(stable(parseTrainProgress(LOG))).toEqual({
      lines: 11,
      totalEpochs: 2,
      stepsPerEpoch: 96,
      totalSteps: 192,
      epoch: 0,
      epochStep: 41,
      step: 41,
      loss: 5.98,
      acc: 0.32,
      lastCheckpoint: '/o/epoch_0_step_40',
    });
  });

  it('gives the same answer however the log is cut into chunks', () => {
    const whole = stable(parseTrainProgress(LOG));
    for (let cut = 0; cut <= LOG.length; cut++) {
      const p = parseTrainProgress(LOG.slice(cut), parseTrainProgress(LOG.slice(0, cut)));
      expect(stable(p), `cut at ${cut}`).toEqual(whole);
    }
    for (let a = 0; a < LOG.length; a += 37) {
      for (let b = a; b <= LOG.length; b += 53) {
        const p = parseTrainProgress(LOG.slice(b), parseTrainProgress(LOG.slice(a, b), parseTrainProgress(LOG.slice(0, a))));
        expect(stable(p), `cuts at ${a}, ${b}`).toEqual(whole);
      }
    }
  });

  it('does not take a meter cut short at the end of a chunk, and keeps earlier values meanwhile', () => {
    const p1 = parseTrainProgress(LOG);
    const p2 = parseTrainProgress(`${meter(0, 42, 96, ', loss=5.91, acc=0.33, time=0.50s').slice(0, 60)}`, p1);
    expect([p2.step, p2.loss]).toEqual([41, 5.98]);
    const p3 = parseTrainProgress(meter(0, 42, 96, ', loss=5.91, acc=0.33, time=0.50s').slice(60), p2);
    expect([p3.step, p3.loss, p3.acc]).toEqual([42, 5.91, 0.33]);
  });

  it('counts global steps across epochs and reads nan losses', () => {
    const p = parseTrainProgress(`${meter(0, 96, 96, ', loss=5.1, acc=0.5, time=0.5s')}\n${meter(1, 96, 96, ', loss=nan, acc=0.00, time=0.50s')}\n`);
    expect([p.epoch, p.step, p.epochStep, p.lines]).toEqual([1, 192, 96, 2]);
    expect(p.loss).toBeNaN();
  });

  it('caps total steps by --max-num-steps and records where a continuation started', () => {
    const log =
      'num_epochs                             ··· 2\n' +
      'max_num_steps                          ·· 72\n' +
      'Finetuning from base model: /o/epoch_1_step_120\n' +
      'rank 0: Auto-calculated total_steps: 192 (num_epochs=2 * steps_per_epoch=96)\n' +
      'Starting training from epoch 0\n' +
      meter(0, 5, 96, ', loss=4.0, acc=0.5, time=0.5s');
    const p = parseTrainProgress(log);
    expect([p.totalSteps, p.maxNumSteps, p.startedFrom, p.step]).toEqual([72, 72, '/o/epoch_1_step_120', 5]);
  });

  it('keeps only a short unfinished tail, however long an epoch runs without a newline', () => {
    let p = parseTrainProgress('');
    for (let n = 1; n <= 3000; n++) p = parseTrainProgress(meter(3, n, 5000, ', loss=2.00, acc=0.70, time=0.50s'), p);
    expect(p.step).toBe(3 * 5000 + 3000);
    expect((p.partial ?? '').length).toBeLessThanOrEqual(4096);
  });
});
