import { describe, expect, it } from 'vitest';
import { checkServerIdentity } from '../../src/sglang/identity.js';

// A trimmed /server_info answer: server args, scheduler info, internal_states, version.
function info(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model_path: '/models/Llama-3.1-8B-Instruct',
    tokenizer_path: '/models/Llama-3.1-8B-Instruct',
    host: '127.0.0.1',
    port: 30000,
    tp_size: 8,
    speculative_algorithm: 'EAGLE3',
    speculative_draft_model_path: '/runs/r1/drafter',
    speculative_num_steps: 3,
    max_running_requests: 250,
    internal_states: [{ avg_spec_accept_length: 3.1, last_gen_throughput: 812.4 }],
    version: '0.5.2',
    ...over,
  };
}

const OURS = {
  modelPath: '/models/Llama-3.1-8B-Instruct',
  port: 30000,
  speculativeAlgorithm: 'EAGLE3',
  draftModelPath: '/runs/r1/drafter',
};

describe('checkServerIdentity', () => {
  it('finds no mismatch for the server we launched', () => {
    expect(checkServerIdentity(info(), OURS)).toEqual([]);
    expect(checkServerIdentity(info(), { ...OURS, tpSize: 8 })).toEqual([]);
  });

  it('names a different model path in plain words', () => {
    expect(checkServerIdentity(info({ model_path: '/models/Qwen3-8B' }), OURS)).toEqual([
      'server_info says model_path=/models/Qwen3-8B, we launched /models/Llama-3.1-8B-Instruct',
    ]);
  });

  it('treats a trailing slash as the same directory', () => {
    expect(checkServerIdentity(info({ model_path: '/models/Llama-3.1-8B-Instruct/' }), OURS)).toEqual([]);
  });

  it('names a different port', () => {
    expect(checkServerIdentity(info({ port: 30001 }), OURS)).toEqual([
      'server_info says port=30001, we launched 30000',
    ]);
  });

  it('names a different tp size when asked to check it', () => {
    expect(checkServerIdentity(info({ tp_size: 4 }), { ...OURS, tpSize: 8 })).toEqual([
      'server_info says tp_size=4, we launched 8',
    ]);
  });

  it('never tolerates a missing model_path or port', () => {
    const result = checkServerIdentity({ status: 'ok' }, OURS);
    expect(result[0]).toMatch(/^server_info has no model_path \(\(absent\)\): cannot tell/);
    expect(result[1]).toMatch(/^server_info has no port: cannot tell/);
  });

  it('names a different speculative algorithm (the incident-3 server)', () => {
    expect(checkServerIdentity(info({ speculative_algorithm: 'EAGLE' }), OURS)).toEqual([
      'server_info says speculative_algorithm=EAGLE, we launched EAGLE3',
    ]);
  });

  it('knows SGLang reports NEXTN as EAGLE', () => {
    const mtp = info({ speculative_algorithm: 'EAGLE', speculative_draft_model_path: '/models/DeepSeek-V3' });
    expect(
      checkServerIdentity(mtp, {
        modelPath: '/models/Llama-3.1-8B-Instruct',
        port: 30000,
        speculativeAlgorithm: 'NEXTN',
      }),
    ).toEqual([]);
  });

  it('flags a server without speculation when we launched one', () => {
    expect(checkServerIdentity(info({ speculative_algorithm: null }), OURS)).toEqual([
      'server_info says speculative_algorithm=null, we launched EAGLE3',
    ]);
    expect(checkServerIdentity(info({ speculative_algorithm: undefined }), OURS)[0]).toBe(
      'server_info says speculative_algorithm=(absent), we launched EAGLE3',
    );
  });

  it('flags a speculative server when we launched the target alone', () => {
    expect(checkServerIdentity(info(), { modelPath: '/models/Llama-3.1-8B-Instruct', port: 30000 })).toEqual([
      'server_info says speculative_algorithm=EAGLE3, we launched without speculative decoding',
    ]);
  });

  it('accepts a target-only server whose version predates the speculative fields', () => {
    const old = { model_path: '/models/Llama-3.1-8B-Instruct', port: 30000, tp_size: 8, version: '0.3.6' };
    expect(checkServerIdentity(old, { modelPath: '/models/Llama-3.1-8B-Instruct', port: 30000 })).toEqual([]);
  });

  it('names a different or missing draft model path', () => {
    expect(checkServerIdentity(info({ speculative_draft_model_path: '/runs/old/drafter' }), OURS)).toEqual([
      'server_info says speculative_draft_model_path=/runs/old/drafter, we launched /runs/r1/drafter',
    ]);
    expect(checkServerIdentity(info({ speculative_draft_model_path: null }), OURS)).toEqual([
      'server_info says speculative_draft_model_path=null, we launched /runs/r1/drafter',
    ]);
  });

  it('lists every mismatch of a different server at once', () => {
    const stale = info({
      model_path: '/models/Qwen3-8B',
      port: '30000',
      speculative_algorithm: null,
      speculative_draft_model_path: null,
    });
    expect(checkServerIdentity(stale, OURS)).toEqual([
      'server_info says model_path=/models/Qwen3-8B, we launched /models/Llama-3.1-8B-Instruct',
      'server_info says speculative_algorithm=null, we launched EAGLE3',
      'server_info says speculative_draft_model_path=null, we launched /runs/r1/drafter',
    ]);
  });
});
