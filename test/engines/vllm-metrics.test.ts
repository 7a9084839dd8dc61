import { describe, expect, it } from 'vitest';
import { counterDelta, positionRates, specCounters, windowAcceptLength } from '../../src/engines/index.js';

const text = (
  drafts: number,
  tokens: number,
  accepted: number,
  pos: number[],
) => `# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="/m"} ${drafts}
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="/m"} ${tokens}
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="/m"} ${accepted}
${pos.map((a, i) => `vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="/m",position="${i}"} ${a}`).join('\n')}
vllm:num_requests_running{engine="0",model_name="/m"} 0.0
`;

describe("vLLM's spec-decode counters", () => {
  it('parses the counters and takes the accept length of a window as 1 + Δaccepted/Δdrafts', () => {
    const before = specCounters(text(189, 567, 0, [0, 0, 0]))!;
    expect(before).toEqual({ drafts: 189, draftTokens: 567, accepted: 0, perPosition: [0, 0, 0] });
    const after = specCounters(text(289, 867, 150, [80, 50, 20]))!;
    const d = counterDelta(before, after);
    expect(d).toEqual({ drafts: 100, draftTokens: 300, accepted: 150, perPosition: [80, 50, 20] });
    expect(windowAcceptLength(d)).toBeCloseTo(2.5);
    expect(positionRates(d)).toEqual([0.8, 0.5, 0.2]);
  });

  it('sums the series of several engines, and says "none" for a server without speculation', () => {
    const two = `vllm:spec_decode_num_drafts_total{engine="0"} 10\nvllm:spec_decode_num_drafts_total{engine="1"} 5\nvllm:spec_decode_num_accepted_tokens_total{engine="0"} 3\nvllm:spec_decode_num_accepted_tokens_total{engine="1"} 3\n`;
    expect(specCounters(two)).toMatchObject({ drafts: 15, accepted: 6 });
    expect(specCounters('vllm:num_requests_running{engine="0"} 0.0\n')).toBeUndefined();
  });

  it('measures nothing in a window with no drafts or with counters reset by a restart', () => {
    const a = specCounters(text(10, 30, 5, []))!;
    expect(windowAcceptLength(counterDelta(a, a))).toBeUndefined();
    expect(windowAcceptLength(counterDelta(a, specCounters(text(2, 6, 1, []))!))).toBeUndefined();
  });
});

describe('real vLLM 0.32.0 /metrics (test/fixtures/real/vllm-0.32.0)', () => {
  it('reads the counters around two greedy requests of a random drafter: drafts made, nothing accepted', async () => {
    const { readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const fx = (n: string) => readFileSync(join(import.meta.dirname, '../fixtures/real/vllm-0.32.0', n), 'utf8');
    const before = specCounters(fx('metrics-before.txt'))!;
    const after = specCounters(fx('metrics-after.txt'))!;
    const d = counterDelta(before, after);
    expect(d.drafts).toBeGreaterThan(0);
    expect(d.draftTokens).toBe(3 * d.drafts);
    expect(d.accepted).toBe(0);
    expect(windowAcceptLength(d)).toBe(1);
  });
});
