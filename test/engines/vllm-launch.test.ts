import { describe, expect, it } from 'vitest';
import { renderVllmArgv, vllmBenchmarkArgs } from '../../src/engines/index.js';
import type { ServerLaunchSpec } from '../../src/sglang/launch-argv.js';

const base: ServerLaunchSpec = {
  launcher: ['/v/bin/python', '-m', 'vllm.entrypoints.openai.api_server'],
  modelPath: '/models/t',
  port: 8123,
  host: '127.0.0.1',
  tpSize: 1,
  extraArgs: ['--max-model-len', '512', '--enforce-eager'],
};

describe('vLLM launch lines', () => {
  it('renders the serve line: launcher, aerie flags in a fixed order, then extra-args verbatim', () => {
    expect(renderVllmArgv(base)).toEqual([
      '/v/bin/python',
      '-m',
      'vllm.entrypoints.openai.api_server',
      '--model',
      '/models/t',
      '--host',
      '127.0.0.1',
      '--port',
      '8123',
      '--tensor-parallel-size',
      '1',
      '--max-model-len',
      '512',
      '--enforce-eager',
    ]);
  });

  it('renders EAGLE-3 as one --speculative-config JSON object (num_speculative_tokens from num-steps)', () => {
    const argv = renderVllmArgv({
      ...base,
      maxRunningRequests: 250,
      speculative: { algorithm: 'EAGLE3', draftModelPath: '/runs/r/train/drafter', numSteps: 3 },
    });
    const i = argv.indexOf('--speculative-config');
    expect(JSON.parse(argv[i + 1]!)).toEqual({
      method: 'eagle3',
      model: '/runs/r/train/drafter',
      num_speculative_tokens: 3,
    });
    expect(argv.slice(argv.indexOf('--max-num-seqs'), argv.indexOf('--max-num-seqs') + 2)).toEqual([
      '--max-num-seqs',
      '250',
    ]);
    // EAGLE (the wrong method for an EAGLE-3 drafter: incident 3) renders as vLLM's method eagle.
    const eagle = renderVllmArgv({ ...base, speculative: { algorithm: 'EAGLE', draftModelPath: '/d' } });
    expect(JSON.parse(eagle[eagle.indexOf('--speculative-config') + 1]!).method).toBe('eagle');
  });

  it('refuses what aerie sets itself, speculative settings in extra-args, topk above 1 and extraction', () => {
    expect(() => renderVllmArgv({ ...base, extraArgs: ['--port', '9'] })).toThrow(/extra-args sets --port/);
    expect(() => renderVllmArgv({ ...base, extraArgs: ['-tp', '2'] })).toThrow(/--tensor-parallel-size/);
    expect(() => renderVllmArgv({ ...base, extraArgs: ['--speculative-config={}'] })).toThrow(
      /belong in stages.deploy/,
    );
    expect(() =>
      renderVllmArgv({ ...base, speculative: { algorithm: 'EAGLE3', draftModelPath: '/d', eagleTopk: 4 } }),
    ).toThrow(/eagle-topk 4/);
    expect(() => renderVllmArgv({ ...base, speculative: { algorithm: 'NGRAM' } })).toThrow(/not served through/);
    expect(() => renderVllmArgv({ ...base, extraction: true })).toThrow(/driver: transformers/);
  });

  it("sets --max-num-seqs from the sweep only when vLLM's lowest default (128) could cap it", () => {
    expect(vllmBenchmarkArgs(base, 100).spec.maxRunningRequests).toBeUndefined();
    const up = vllmBenchmarkArgs(base, 250);
    expect(up.spec.maxRunningRequests).toBe(250);
    expect(up.notes[0]).toMatch(/set --max-num-seqs 250/);
    expect(vllmBenchmarkArgs({ ...base, maxRunningRequests: 64 }, 250).notes[0]).toMatch(/levels above 64 will queue/);
  });
});
