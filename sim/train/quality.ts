/**
 * How good the simulated drafter gets. Everything is a pure function of the training it has
 * seen, counted in sample-epochs (samples × epochs, fractional mid-epoch), so a run that
 * crashed and was continued ends exactly where an uninterrupted run ends.
 *
 * Calibrated to the figures in the reference: a handful of samples gives an accept length
 * around 1.4, the demo's ~96 samples × 2 epochs about 2.75, and the published recipes
 * (~500k samples × 3 epochs) approach 3.8.
 */

const MAX_GAIN = 2.8; // accept length = 1 (no draft token accepted) + up to 2.8
const SLOPE = 0.63; // per e-fold of sample-epochs
const MIDPOINT = 4.45; // ln(sample-epochs) where half the gain is reached (~86)

/** 0 → 1: how far along the learning curve a drafter with this much training is. */
export function learnedFraction(sampleEpochs: number): number {
  if (!(sampleEpochs > 0)) return 0;
  return 1 / (1 + Math.exp(-SLOPE * (Math.log(sampleEpochs) - MIDPOINT)));
}

export const roundTo = (x: number, digits: number): number => Number(x.toFixed(digits));

export function acceptLength(sampleEpochs: number): number {
  return roundTo(1 + MAX_GAIN * learnedFraction(sampleEpochs), 2);
}

/** A small deterministic wobble so the curve does not look ruled (±1). */
function wobble(step: number): number {
  let h = (step * 2654435761) >>> 0;
  h ^= h >>> 15;
  h = Math.imul(h, 2246822519) >>> 0;
  h ^= h >>> 13;
  return ((h >>> 0) / 0xffffffff) * 2 - 1;
}

/** What a training step reports: ploss averaged over TTT positions, and top-1 accuracy. */
export function stepMetrics(sampleEpochs: number, globalStep: number): { loss: number; acc: number } {
  const f = learnedFraction(sampleEpochs);
  const loss = 9.8 - 7.4 * f + 0.15 * wobble(globalStep);
  const acc = 0.06 + 0.74 * f + 0.02 * wobble(globalStep + 7919);
  return { loss: Math.max(0.05, loss), acc: Math.min(0.99, Math.max(0, acc)) };
}
