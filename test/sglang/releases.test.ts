/**
 * aerie's per-release SGLang facts (src/sglang/releases.ts), golden per release: each
 * expectation is what that release's wheel does (the source is cited beside each rule there).
 */
import { describe, expect, it } from 'vitest';
import {
  atLeast,
  benchServingModule,
  eagle3TargetProblem,
  legacyInfoRoutesFirst,
  nearestRead,
  noCudaGraphArgs,
  readinessEndpoint,
  releaseExtraArgs,
  reportedVersionProblem,
  specV2Launch,
  targetArchitectures,
} from '../../src/sglang/releases.js';

const EAGLE3 = { algorithm: 'EAGLE3', eagleTopk: 1 };

describe('release order', () => {
  it('compares by numbers, not text', () => {
    expect(atLeast('0.5.12', '0.5.9')).toBe(true);
    expect(atLeast('0.5.9', '0.5.12')).toBe(false);
    expect(atLeast('0.5.23', '0.5.23')).toBe(true);
    expect(atLeast('0.5.23.post1', '0.5.23')).toBe(true);
    expect(atLeast('nonsense', '0.5.4')).toBe(false);
    expect(nearestRead('0.5.10')).toBe('0.5.9');
    expect(nearestRead('0.5.3')).toBeUndefined();
  });
});

describe('spec v2 per release (S2)', () => {
  it('0.5.4: --enable-beta-spec when asked, nothing by default', () => {
    expect(specV2Launch('0.5.4', 'on', EAGLE3)).toMatchObject({ args: ['--enable-beta-spec'], env: {} });
    expect(specV2Launch('0.5.4', 'auto', EAGLE3)).toMatchObject({
      args: [],
      env: {},
      note: expect.stringMatching(/spec v2: off \(SGLang 0\.5\.4/),
    });
    expect(() => specV2Launch('0.5.4', 'auto', { ...EAGLE3, serverEnv: { SGLANG_ENABLE_SPEC_V2: 'True' } })).toThrow(
      /server\.env sets SGLANG_ENABLE_SPEC_V2, which SGLang 0\.5\.4 does not read .*Fix: remove it from server\.env and set stages\.deploy\.spec-v2: on/,
    );
  });

  it('0.5.9: the env var, default False; on renders it; topk > 1 with spec v2 is refused as 0.5.9 refuses it', () => {
    expect(specV2Launch('0.5.9', 'auto', EAGLE3)).toEqual({
      args: [],
      env: {},
      note: 'spec v2 (overlap scheduling of draft and verify): off on SGLang 0.5.9 (SGLANG_ENABLE_SPEC_V2 unset, default False)',
    });
    expect(specV2Launch('0.5.9', 'on', EAGLE3)).toMatchObject({ args: [], env: { SGLANG_ENABLE_SPEC_V2: 'True' } });
    expect(specV2Launch('0.5.9', 'off', EAGLE3).env).toEqual({ SGLANG_ENABLE_SPEC_V2: 'False' });
    expect(() => specV2Launch('0.5.9', 'on', { algorithm: 'EAGLE3', eagleTopk: 4 })).toThrow(
      /SGLang 0\.5\.9 refuses spec v2 with topk 4.*Fix: set stages\.deploy\.eagle-topk: 1, or spec-v2: off/,
    );
    // server.env's own setting is the request when spec-v2 is auto, and is not rendered twice.
    const fromEnv = specV2Launch('0.5.9', 'auto', { ...EAGLE3, serverEnv: { SGLANG_ENABLE_SPEC_V2: '1' } });
    expect(fromEnv).toMatchObject({
      env: {},
      note: expect.stringMatching(/: on on SGLang 0\.5\.9 \(SGLANG_ENABLE_SPEC_V2=1 from server\.env\)/),
    });
    expect(() => specV2Launch('0.5.9', 'off', { ...EAGLE3, serverEnv: { SGLANG_ENABLE_SPEC_V2: 'True' } })).toThrow(
      /but stages\.deploy\.spec-v2 is off\. Fix: remove SGLANG_ENABLE_SPEC_V2/,
    );
    expect(() => specV2Launch('0.5.9', 'auto', { ...EAGLE3, serverEnv: { SGLANG_ENABLE_SPEC_V2: 'maybe' } })).toThrow(
      /neither true nor false/,
    );
  });

  it('0.5.12: default True, and topk > 1 falls back to spec v1 (noted, not refused)', () => {
    expect(specV2Launch('0.5.12', 'auto', EAGLE3)).toEqual({
      args: [],
      env: {},
      note: 'spec v2 (overlap scheduling of draft and verify): on on SGLang 0.5.12 (SGLANG_ENABLE_SPEC_V2 unset, default True)',
    });
    expect(specV2Launch('0.5.12', 'off', EAGLE3).env).toEqual({ SGLANG_ENABLE_SPEC_V2: 'False' });
    expect(specV2Launch('0.5.12', 'auto', { algorithm: 'EAGLE3', eagleTopk: 8 }).note).toMatch(
      /with topk > 1 SGLang runs spec v1 anyway/,
    );
  });

  it("a release between two read ones gets the older one's facts and says so", () => {
    expect(specV2Launch('0.5.10', 'auto', EAGLE3).note).toMatch(/off on SGLang 0\.5\.10 \(not read; 0\.5\.9's facts\)/);
    expect(specV2Launch('0.5.14', 'auto', EAGLE3).note).toMatch(/on on SGLang 0\.5\.14 \(not read; 0\.5\.12's facts\)/);
  });

  it("0.5.15 on: always on; off and the removed env var are refused with the release's own words", () => {
    for (const v of ['0.5.15', '0.5.23']) {
      expect(specV2Launch(v, 'auto', EAGLE3)).toMatchObject({
        args: [],
        env: {},
        note: expect.stringMatching(/always on from SGLang 0\.5\.15/),
      });
      expect(specV2Launch(v, 'on', EAGLE3)).toMatchObject({ args: [], env: {} });
      expect(() => specV2Launch(v, 'off', EAGLE3)).toThrow(
        /spec-v2: off cannot be had on SGLang .*Fix: set spec-v2: auto, and add --disable-overlap-schedule to server\.extra-args/,
      );
      expect(() => specV2Launch(v, 'auto', { ...EAGLE3, serverEnv: { SGLANG_ENABLE_SPEC_V2: 'True' } })).toThrow(
        /SGLANG_ENABLE_SPEC_V2 has been removed.*Fix: remove it from server\.env/,
      );
    }
  });
});

describe('EAGLE-3 per target (Kimi-K2.5)', () => {
  const kimi = targetArchitectures({ architectures: ['KimiK25ForConditionalGeneration'], text_config: {} });
  it('reads the target config.json architectures', () => {
    expect(kimi).toEqual(['KimiK25ForConditionalGeneration']);
    expect(targetArchitectures({})).toEqual([]);
    expect(targetArchitectures(undefined)).toEqual([]);
  });

  it('refuses EAGLE3 on Kimi-K2.5 before 0.5.11, where kimi_k25.py lacks set_eagle3_layers_to_capture', () => {
    for (const v of ['0.5.4', '0.5.9', '0.5.10']) {
      expect(eagle3TargetProblem(v, 'EAGLE3', kimi)).toMatch(
        new RegExp(
          `stages\\.deploy\\.speculative-algorithm: EAGLE3 needs SGLang 0\\.5\\.11 or later for a KimiK25ForConditionalGeneration target .*host runs ${v.replace(/\./g, '\\.')}\\. Fix:`,
        ),
      );
    }
    for (const v of ['0.5.11', '0.5.12', '0.5.23']) expect(eagle3TargetProblem(v, 'EAGLE3', kimi)).toBeUndefined();
    // Another algorithm, or another target, is not this rule's business.
    expect(eagle3TargetProblem('0.5.9', 'NGRAM', kimi)).toBeUndefined();
    expect(eagle3TargetProblem('0.5.4', 'EAGLE3', ['LlamaForCausalLM'])).toBeUndefined();
  });
});

describe('extra-args a release renamed or removed (S8, S9)', () => {
  it('leaves every flag alone on the releases that still take it', () => {
    const args = [
      '--stream-output',
      '--cuda-graph-max-bs',
      '256',
      '--cuda-graph-bs',
      '1',
      '2',
      '4',
      '--disable-cuda-graph',
      '--trust-remote-code',
    ];
    for (const v of ['0.5.4', '0.5.9']) expect(releaseExtraArgs(v, args)).toEqual({ args, notes: [] });
    expect(releaseExtraArgs(undefined, args)).toEqual({ args, notes: [] });
  });

  it('0.5.12 renames --stream-output only; 0.5.15 and 0.5.23 the CUDA-graph flags too, to the same settings', () => {
    expect(releaseExtraArgs('0.5.12', ['--stream-output', '--cuda-graph-max-bs=256']).args).toEqual([
      '--incremental-streaming-output',
      '--cuda-graph-max-bs=256',
    ]);
    const r = releaseExtraArgs('0.5.23', [
      '--stream-output',
      '--cuda-graph-max-bs',
      '256',
      '--cuda-graph-bs',
      '1',
      '2',
      '4',
      '--disable-cuda-graph',
    ]);
    expect(r.args).toEqual([
      '--incremental-streaming-output',
      '--cuda-graph-max-bs-decode',
      '256',
      '--cuda-graph-bs-decode',
      '1',
      '2',
      '4',
      '--cuda-graph-backend-decode',
      'disabled',
      '--cuda-graph-backend-prefill',
      'disabled',
    ]);
    expect(r.notes).toEqual([
      expect.stringMatching(
        /--stream-output is removed in 0\.5\.23 \(argparse: "unrecognized arguments: --stream-output"\) on SGLang 0\.5\.23; rendered as --incremental-streaming-output/,
      ),
      expect.stringMatching(
        /--cuda-graph-max-bs is removed in 0\.5\.23 \(argparse: "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"\).*rendered as --cuda-graph-max-bs-decode, the same setting/,
      ),
      expect.stringMatching(/--cuda-graph-bs is removed in 0\.5\.23 .*rendered as --cuda-graph-bs-decode/),
      expect.stringMatching(
        /--disable-cuda-graph is deprecated on SGLang 0\.5\.23 \("Use '--cuda-graph-backend-\{decode,prefill\}=disabled' instead"\)/,
      ),
    ]);
    expect(releaseExtraArgs('0.5.15', ['--cuda-graph-max-bs', '8']).notes[0]).toMatch(
      /deprecated there \("Use '--cuda-graph-max-bs-decode' instead"\)/,
    );
  });

  it('refuses a new spelling on a release that predates it, and flags the config owns', () => {
    expect(() => releaseExtraArgs('0.5.9', ['--incremental-streaming-output'])).toThrow(
      /which SGLang 0\.5\.9 does not have \(it arrives in 0\.5\.12\)\. Fix: write --stream-output instead/,
    );
    expect(() => releaseExtraArgs('0.5.12', ['--cuda-graph-max-bs-decode', '8'])).toThrow(
      /Fix: write --cuda-graph-max-bs instead/,
    );
    expect(() => releaseExtraArgs('0.5.4', ['--enable-beta-spec'])).toThrow(
      /server\.extra-args sets --enable-beta-spec: spec v2 belongs in stages\.deploy\.spec-v2.*Fix: remove it/,
    );
    expect(() => releaseExtraArgs('0.5.23', ['--disable-cuda-graph=1'])).toThrow(/takes no value/);
  });

  it('no CUDA graphs for extraction: the old flag before 0.5.15, the per-phase backends from it', () => {
    expect(noCudaGraphArgs('0.5.12')).toEqual(['--disable-cuda-graph']);
    expect(noCudaGraphArgs(undefined)).toEqual(['--disable-cuda-graph']);
    expect(noCudaGraphArgs('0.5.15')).toEqual([
      '--cuda-graph-backend-decode',
      'disabled',
      '--cuda-graph-backend-prefill',
      'disabled',
    ]);
  });
});

describe('readiness, routes, the reported release, the benchmark module', () => {
  it('/health that does not generate (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false, 0.5.9 on) is replaced by /health_generate', () => {
    const off = { SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION: 'false' };
    expect(readinessEndpoint('0.5.23', '/health', off)).toEqual({
      endpoint: '/health_generate',
      note: expect.stringMatching(/readiness polls \/health_generate, not server\.readiness\.endpoint \/health/),
    });
    expect(readinessEndpoint('0.5.9', '/health', { SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION: '0' }).endpoint).toBe(
      '/health_generate',
    );
    expect(readinessEndpoint(undefined, '/health', off).endpoint).toBe('/health_generate');
    expect(readinessEndpoint('0.5.4', '/health', off)).toEqual({
      endpoint: '/health',
      note: expect.stringMatching(/SGLang 0\.5\.4 does not read: \/health still generates/),
    });
    expect(readinessEndpoint('0.5.23', '/health', {})).toEqual({ endpoint: '/health' });
    expect(readinessEndpoint('0.5.23', '/health', { SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION: 'true' })).toEqual({
      endpoint: '/health',
    });
    expect(readinessEndpoint('0.5.23', '/health_generate', off)).toEqual({ endpoint: '/health_generate' });
  });

  it('asks the /get_* routes first only where /server_info does not exist (0.5.4)', () => {
    expect(legacyInfoRoutesFirst('0.5.4')).toBe(true);
    expect(legacyInfoRoutesFirst('0.5.9')).toBe(false);
    expect(legacyInfoRoutesFirst('0.5.23')).toBe(false);
    expect(legacyInfoRoutesFirst(undefined)).toBe(false);
  });

  it('names the field and the fix when the server reports another release', () => {
    expect(reportedVersionProblem('0.5.23', 'server.sglang-version', '0.5.4')).toBe(
      'server.sglang-version says 0.5.23 but the server reports 0.5.4: the launch was rendered for the wrong release. ' +
        'Fix: set server.sglang-version: 0.5.4 (or auto with a [python, -m, sglang.launch_server] launcher), or point server.launcher at the 0.5.23 environment',
    );
    expect(reportedVersionProblem('0.5.12', '/opt/venv/bin/python (importlib.metadata)', '0.5.23')).toMatch(
      /resolved to 0\.5\.12 \(\/opt\/venv\/bin\/python \(importlib\.metadata\)\) but the server reports 0\.5\.23.*Fix: pin server\.sglang-version: 0\.5\.23/,
    );
    expect(reportedVersionProblem('0.5.23', 'server.sglang-version', '0.5.23')).toBeUndefined();
    expect(reportedVersionProblem('0.5.23', 'server.sglang-version', '0.5.23.post1')).toBeUndefined();
    expect(reportedVersionProblem('0.5.23', 'server.sglang-version', undefined)).toBeUndefined();
  });

  it('bench_serving moved to sglang.benchmark.serving in 0.5.15 (S18)', () => {
    expect(benchServingModule('0.5.4')).toBe('sglang.bench_serving');
    expect(benchServingModule('0.5.12')).toBe('sglang.bench_serving');
    expect(benchServingModule('0.5.15')).toBe('sglang.benchmark.serving');
    expect(benchServingModule('0.5.23')).toBe('sglang.benchmark.serving');
    expect(benchServingModule(undefined)).toBe('sglang.bench_serving');
  });
});
