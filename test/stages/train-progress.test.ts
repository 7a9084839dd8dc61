import { describe, expect, it } from 'vitest';
import { parseTrainProgress, type TrainProgress, seedProgress } from '../../src/stages/train/progress.js';

const meter = (e: number, n: number, total: number, post = ''): string =>
  `\rTraining Epoch ${e}: ${String(Math.round((100 * n) / total)).padStart(3)}%|█▏        | ${n}/${total} [00:20<00:28,  1.99it/s${post}]`;

/**
 * A SpecForge v0.2 log (03a3dedb…) as a merged stdout+stderr file shows it: the args dump is
 * the only print before the meters; logger.info lines never reach it.
 */
const LOG =
  '\n -----------【args】-----------\n' +
  'target_model_path                      ···· /models/llama-8b\n' +
  'num_epochs                             ··· 2\n' +
  'max_num_steps                          ···· None\n' +
  meter(0, 0, 96) +
  meter(0, 1, 96, ', loss=9.41, acc=0.08, time=0.50s') +
  meter(0, 40, 96, ', loss=6.02, acc=0.31, time=0.50s') +
  meter(0, 41, 96, ', loss=5.98, acc=0.32, time=2.51s');

const stable = (p: TrainProgress): Omit<TrainProgress, 'partial'> => {
  const { partial: _p, ...rest } = p;
  return rest;
};

describe('parseTrainProgress', () => {
  it('reads epoch, step, totals, loss and acc from the args dump and the meter', () => {
    expect(stable(parseTrainProgress(LOG))).toEqual({
      lines: 5,
      totalEpochs: 2,
      stepsPerEpoch: 96,
      totalSteps: 192,
      epoch: 0,
      epochStep: 41,
      step: 41,
      loss: 5.98,
      acc: 0.32,
    });
  });

  it('takes totals from the launch when the log has no args dump (the v0.2.0 release prints none)', () => {
    const bare = meter(0, 0, 96) + meter(0, 7, 96, ', loss=6.5, acc=0.2, time=0.50s');
    expect(parseTrainProgress(bare).totalSteps).toBeUndefined();
    const p = parseTrainProgress(bare, seedProgress({ numEpochs: 2, maxNumSteps: undefined }));
    expect([p.step, p.totalSteps, p.stepsPerEpoch]).toEqual([7, 192, 96]);
  });

  it('reports a --ckpt-dir continuation in run-wide steps: its meter counts from zero', () => {
    const p = parseTrainProgress(
      meter(0, 5, 96, ', loss=4.0, acc=0.5, time=0.5s'),
      seedProgress({ numEpochs: 2, maxNumSteps: 72 }, 120),
    );
    expect([p.step, p.totalSteps, p.baseStep]).toEqual([125, 192, 120]);
  });

  it('reads acceptance_rate and grad_norm where the meter has them (20e2e3f0), without taking either for acc', () => {
    const p = parseTrainProgress(
      meter(1, 3, 8, ', loss=3.21, acc=0.44, acceptance_rate=0.39, time=0.50s, grad_norm=1.25'),
    );
    expect([p.loss, p.acc, p.acceptanceRate, p.gradNorm, p.step]).toEqual([3.21, 0.44, 0.39, 1.25, 11]);
  });

  it('ignores logger.info lines even if a handler printed them: only prints and meters count', () => {
    const p = parseTrainProgress(
      'rank 0: Auto-calculated total_steps: 999 (num_epochs=9 * steps_per_epoch=111)\nSaved model configuration to /o/epoch_0_step_40\n' +
        meter(0, 2, 96),
    );
    expect([p.totalEpochs, p.stepsPerEpoch, p.lastCheckpoint]).toEqual([undefined, 96, undefined]);
  });

  it('gives the same answer however the log is cut into chunks', () => {
    const whole = stable(parseTrainProgress(LOG));
    for (let cut = 0; cut <= LOG.length; cut++) {
      const p = parseTrainProgress(LOG.slice(cut), parseTrainProgress(LOG.slice(0, cut)));
      expect(stable(p), `cut at ${cut}`).toEqual(whole);
    }
    for (let a = 0; a < LOG.length; a += 37) {
      for (let b = a; b <= LOG.length; b += 53) {
        const p = parseTrainProgress(
          LOG.slice(b),
          parseTrainProgress(LOG.slice(a, b), parseTrainProgress(LOG.slice(0, a))),
        );
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
    const p = parseTrainProgress(
      `${meter(0, 96, 96, ', loss=5.1, acc=0.5, time=0.5s')}\n${meter(1, 96, 96, ', loss=nan, acc=0.00, time=0.50s')}\n`,
    );
    expect([p.epoch, p.step, p.epochStep, p.lines]).toEqual([1, 192, 96, 2]);
    expect(p.loss).toBeNaN();
  });

  it('caps total steps by --max-num-steps and records what a working --resume loaded', () => {
    const log =
      'num_epochs                             ··· 2\n' +
      'max_num_steps                          ·· 72\n' +
      'Last checkpoint detected: /o/epoch_0_step_40\n'.repeat(2) +
      meter(0, 0, 96) +
      meter(0, 41, 96, ', loss=4.0, acc=0.5, time=0.5s');
    const p = parseTrainProgress(log);
    expect([p.totalSteps, p.maxNumSteps, p.startedFrom, p.step]).toEqual([72, 72, '/o/epoch_0_step_40', 41]);
    expect(parseTrainProgress('Last checkpoint detected: None\n').startedFrom).toBeUndefined();
  });

  it('keeps only a short unfinished tail, however long an epoch runs without a newline', () => {
    let p = parseTrainProgress('');
    for (let n = 1; n <= 3000; n++) p = parseTrainProgress(meter(3, n, 5000, ', loss=2.00, acc=0.70, time=0.50s'), p);
    expect(p.step).toBe(3 * 5000 + 3000);
    expect((p.partial ?? '').length).toBeLessThanOrEqual(4096);
  });
});
