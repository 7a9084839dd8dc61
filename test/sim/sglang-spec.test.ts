import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL, Sim, makeDrafter, until } from '../support/sim-sglang.js';
import { removeWorkdir } from '../support/workdir.js';

const QUALITY = 3.0;

describe('simulated SGLang server: speculative decoding depends on the drafter (incident 3)', () => {
  let drafter: string;
  let eagle3: Sim;
  let eagle: Sim;

  beforeAll(async () => {
    drafter = await makeDrafter(QUALITY);
    [eagle3, eagle] = await Promise.all([
      Sim.start([
        '--model-path',
        MODEL,
        '--speculative-algorithm',
        'EAGLE3',
        '--speculative-draft-model-path',
        drafter,
        '--decode-log-interval',
        '10',
      ]),
      Sim.start([
        '--model-path',
        MODEL,
        '--speculative-algorithm',
        'EAGLE',
        '--speculative-draft-model',
        drafter,
        '--speculative-num-steps',
        '3',
        '--speculative-eagle-topk',
        '1',
        '--speculative-num-draft-tokens',
        '8',
        '--max-running-requests',
        '16',
        '--decode-log-interval',
        '10',
      ]),
    ]);
    await Promise.all([eagle3.ready(), eagle.ready()]);
  });

  afterAll(async () => {
    await Promise.all([eagle3?.stop(), eagle?.stop()]);
    if (drafter) await removeWorkdir(drafter);
  });

  const burst = (sim: Sim, n: number, tokens: number, tag: string) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        sim.json('/generate', {
          text: `${tag} request ${i} about speculative decoding`,
          sampling_params: { max_new_tokens: tokens, ignore_eos: true },
        }),
      ),
    );

  it('EAGLE3 with an EAGLE-3 drafter accepts at the drafter quality (meta_info and server_info)', async () => {
    expect((await eagle3.json('/flush_cache')).status).toBe(200);
    const outs = await burst(eagle3, 8, 256, 'eagle3');
    for (const o of outs) {
      const m = o.body.meta_info;
      expect(m).toMatchObject({ completion_tokens: 256 });
      expect(m.spec_accept_length).toBeCloseTo(m.completion_tokens / m.spec_verify_ct, 10);
      // 0.5.23's names (the default release; sim/sglang/profile.ts specMeta).
      expect(m.spec_accept_rate).toBeCloseTo(m.spec_num_correct_drafts / m.spec_num_proposed_drafts, 10);
      expect(m.spec_num_proposed_drafts).toBe(m.spec_verify_ct * 7);
    }
    const mean = outs.reduce((s, o) => s + o.body.meta_info.spec_accept_length, 0) / outs.length;
    expect(Math.abs(mean - QUALITY)).toBeLessThan(0.35);
    const info = await eagle3.json('/server_info');
    expect(info.body).toMatchObject({
      speculative_algorithm: 'EAGLE3',
      speculative_num_steps: 5,
      speculative_eagle_topk: 4,
      speculative_num_draft_tokens: 8,
    });
    expect(Math.abs(info.body.internal_states[0].avg_spec_accept_length - QUALITY)).toBeLessThan(0.35);
    expect(eagle3.stderr).toMatch(
      /Decode batch\. #running-req: \d+, #token: \d+, token usage: [\d.]+, accept len: \d\.\d\d, accept rate: [\d.]+, cuda graph: True/,
    );
    expect(eagle3.stderr).toContain('Capture draft decode CUDA graph end. elapsed=');
  });

  it('EAGLE with the same drafter runs without error and accepts exactly 1.00', async () => {
    expect((await eagle.json('/flush_cache')).status).toBe(200);
    const outs = await burst(eagle, 4, 256, 'eagle');
    for (const o of outs) {
      expect(o.status).toBe(200);
      expect(o.body.meta_info.spec_num_correct_drafts).toBe(0);
      expect(o.body.meta_info.spec_accept_length.toFixed(2)).toBe('1.00');
    }
    const info = await eagle.json('/server_info');
    expect(info.body.internal_states[0].avg_spec_accept_length).toBe(1);
    expect(info.body).toMatchObject({
      speculative_algorithm: 'EAGLE',
      speculative_num_draft_tokens: 4,
      max_running_requests: 16,
    });
    expect(eagle.stderr).toContain(
      'speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1',
    );
    expect(eagle.stderr).toContain('accept len: 1.00, accept rate: 0.00');
    expect(eagle.stderr).not.toContain('Traceback');
    expect(eagle.stderr).not.toContain('reset to 48');
  });

  it('without --max-running-requests a speculative server warns, runs 48 at a time and queues the rest', async () => {
    expect(eagle3.stderr).toContain(
      'Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.',
    );
    expect((await eagle3.json('/server_info')).body.max_running_requests).toBe(48);
    const pending = burst(eagle3, 60, 3000, 'capped');
    await until('a decode line with 48 running and 12 queued', 15_000, () =>
      /#running-req: 48, .*#queue-req: 12$/m.test(eagle3.stderr) ? true : undefined,
    );
    expect(/#running-req: (49|[5-9]\d),/.test(eagle3.stderr)).toBe(false);
    await pending;
  });
});
