// The simulator's speedup-versus-concurrency curve against the published shapes its constants
// cite (sim/sglang/latency.ts): EAGLE-3 3/1/4 on Llama-3.1-8B, 1×H100.
import { describe, expect, it } from 'vitest';
import { H100_8B, decodeStepMs, steadyThroughput, targetForwardMs } from '../../sim/sglang/latency.js';

const spec = { numSteps: 3, topk: 1, numDraftTokens: 4 };
const speedup = (b: number, accept: number) => steadyThroughput(b, spec, accept) / steadyThroughput(b, null, 1);

describe('sim speed model', () => {
  it('plain decode at batch 1 is the paper’s 158 tok/s (6.32 ms per step)', () => {
    expect(steadyThroughput(1, null, 1)).toBeCloseTo(158.2, 0);
    expect(decodeStepMs(1, null, false)).toBeCloseTo(decodeStepMs(1, null, true) * H100_8B.eagerFactor, 9);
  });

  it('batch 1: about 0.73 × accept length, 2–2.5× for SpecBundle’s Llama-3.1-8B accept lengths', () => {
    // SpecBundle mtbench 2.13× at 2.90, humaneval 2.44× at 3.34 (3/1/4, batch 1).
    expect(speedup(1, 2.9)).toBeGreaterThan(2.0);
    expect(speedup(1, 2.9)).toBeLessThan(2.5);
    expect(speedup(1, 3.34)).toBeCloseTo(2.44, 0);
    expect(speedup(1, 2.9) / 2.9).toBeCloseTo(0.76, 1);
  });

  it('falls with the batch: ~1.4× at 64 (the paper’s 1.38×), below 1× at 250, monotonically', () => {
    expect(speedup(64, 2.7)).toBeGreaterThan(1.25);
    expect(speedup(64, 2.7)).toBeLessThan(1.55);
    expect(speedup(250, 2.7)).toBeLessThan(1);
    const curve = [1, 2, 5, 10, 30, 70, 100, 250].map((b) => speedup(b, 2.7));
    for (let i = 1; i < curve.length; i++) expect(curve[i]).toBeLessThanOrEqual(curve[i - 1]!);
  });

  it('verify turns compute-bound at a quarter of plain decode’s batch', () => {
    // 3/1/4 pushes 4 tokens per request through the target.
    const memory = (b: number) => H100_8B.weightsMs + H100_8B.kvPerReqMs * b;
    expect(targetForwardMs(250, 1000)).toBeGreaterThan(H100_8B.overheadMs + memory(250) * 3);
    expect(targetForwardMs(1, 1)).toBeCloseTo(H100_8B.overheadMs + memory(1), 3);
  });

  it('a bypassed drafter (accept 1) costs the draft and verify work and buys nothing', () => {
    expect(speedup(1, 1)).toBeLessThan(1);
  });
});
