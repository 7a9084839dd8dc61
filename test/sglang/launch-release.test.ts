/**
 * Launch lines rendered for the host's release (ServerLaunchSpec.sglangVersion), golden per
 * release: spec v2, renamed extra-args, the extraction profile's "no CUDA graphs".
 */
import { describe, expect, it } from 'vitest';
import {
  releaseNotes,
  renderServerArgv,
  serverLaunchEnv,
  type ServerLaunchSpec,
} from '../../src/sglang/launch-argv.js';

const LAUNCHER = ['/opt/sglang/bin/python', '-m', 'sglang.launch_server'];
const HEAD = [...LAUNCHER, '--model-path', '/models/t', '--host', '127.0.0.1', '--port', '30000', '--tp-size', '8'];
const SPEC = [
  '--speculative-algorithm',
  'EAGLE3',
  '--speculative-draft-model-path',
  '/d',
  '--speculative-num-steps',
  '3',
  '--speculative-eagle-topk',
  '1',
  '--speculative-num-draft-tokens',
  '4',
];

function deploy(sglangVersion: string | undefined, over: Partial<ServerLaunchSpec> = {}): ServerLaunchSpec {
  return {
    launcher: LAUNCHER,
    modelPath: '/models/t',
    port: 30000,
    tpSize: 8,
    extraArgs: [],
    speculative: { algorithm: 'EAGLE3', draftModelPath: '/d', numSteps: 3, eagleTopk: 1, numDraftTokens: 4 },
    ...(sglangVersion ? { sglangVersion } : {}),
    ...over,
  };
}

describe('deploy with spec v2 asked for, per release', () => {
  it('0.5.4 renders --enable-beta-spec; 0.5.9 and 0.5.12 the env var; 0.5.23 nothing', () => {
    expect(renderServerArgv(deploy('0.5.4', { specV2: 'on' }))).toEqual([...HEAD, ...SPEC, '--enable-beta-spec']);
    expect(serverLaunchEnv({}, undefined, deploy('0.5.4', { specV2: 'on' }))).toEqual({ PYTHONUNBUFFERED: '1' });
    for (const v of ['0.5.9', '0.5.12']) {
      expect(renderServerArgv(deploy(v, { specV2: 'on' }))).toEqual([...HEAD, ...SPEC]);
      expect(serverLaunchEnv({ HF_TOKEN: '${HF_TOKEN}' }, undefined, deploy(v, { specV2: 'on' }))).toEqual({
        PYTHONUNBUFFERED: '1',
        HF_TOKEN: '${HF_TOKEN}',
        SGLANG_ENABLE_SPEC_V2: 'True',
      });
    }
    expect(renderServerArgv(deploy('0.5.23', { specV2: 'on' }))).toEqual([...HEAD, ...SPEC]);
    expect(serverLaunchEnv({}, undefined, deploy('0.5.23', { specV2: 'on' }))).toEqual({ PYTHONUNBUFFERED: '1' });
  });

  it('auto renders nothing on any release, and the notes say what the release does', () => {
    const say = (v: string) => releaseNotes(deploy(v), {});
    for (const v of ['0.5.4', '0.5.9', '0.5.12', '0.5.23'])
      expect(renderServerArgv(deploy(v))).toEqual([...HEAD, ...SPEC]);
    expect(say('0.5.4')).toEqual([expect.stringMatching(/^spec v2: off \(SGLang 0\.5\.4/)]);
    expect(say('0.5.9')).toEqual([
      expect.stringMatching(/off on SGLang 0\.5\.9 \(SGLANG_ENABLE_SPEC_V2 unset, default False\)/),
    ]);
    expect(say('0.5.12')).toEqual([
      expect.stringMatching(/on on SGLang 0\.5\.12 \(SGLANG_ENABLE_SPEC_V2 unset, default True\)/),
    ]);
    expect(say('0.5.23')).toEqual([expect.stringMatching(/always on from SGLang 0\.5\.15/)]);
  });

  it('without a known release nothing release-specific is rendered (as before)', () => {
    expect(renderServerArgv(deploy(undefined, { specV2: 'on' }))).toEqual([...HEAD, ...SPEC]);
    expect(releaseNotes(deploy(undefined, { specV2: 'on' }), {})).toEqual([]);
    expect(serverLaunchEnv({}, undefined, deploy(undefined, { specV2: 'on' }))).toEqual({ PYTHONUNBUFFERED: '1' });
  });

  it('refuses what the release cannot do, with the field and the fix', () => {
    expect(() => serverLaunchEnv({ SGLANG_ENABLE_SPEC_V2: 'True' }, undefined, deploy('0.5.23'))).toThrow(
      /server\.env sets SGLANG_ENABLE_SPEC_V2.*Fix: remove it from server\.env/,
    );
    expect(() => renderServerArgv(deploy('0.5.23', { specV2: 'off' }))).toThrow(
      /spec-v2: off cannot be had on SGLang 0\.5\.23/,
    );
    expect(() => releaseNotes(deploy('0.5.4'), { SGLANG_ENABLE_SPEC_V2: 'True' })).toThrow(
      /SGLang 0\.5\.4 does not read/,
    );
  });
});

describe('extra-args per release', () => {
  const target = (v: string, extraArgs: string[], extraction = false): ServerLaunchSpec => ({
    launcher: LAUNCHER,
    modelPath: '/models/t',
    port: 30000,
    tpSize: 8,
    extraArgs,
    sglangVersion: v,
    extraction,
  });

  it('0.5.23 gets the spellings it takes, and the notes say what was rewritten', () => {
    const spec = target('0.5.23', ['--trust-remote-code', '--cuda-graph-max-bs', '160', '--stream-output']);
    expect(renderServerArgv(spec)).toEqual([
      ...HEAD,
      '--trust-remote-code',
      '--cuda-graph-max-bs-decode',
      '160',
      '--incremental-streaming-output',
    ]);
    expect(releaseNotes(spec, {})).toHaveLength(2);
    expect(renderServerArgv(target('0.5.12', ['--cuda-graph-max-bs', '160']))).toEqual([
      ...HEAD,
      '--cuda-graph-max-bs',
      '160',
    ]);
  });

  it('a flag aerie owns is refused before the launch', () => {
    expect(() => renderServerArgv(target('0.5.4', ['--enable-beta-spec']))).toThrow(/stages\.deploy\.spec-v2/);
  });

  it("the extraction profile disables CUDA graphs in the release's own spelling", () => {
    expect(renderServerArgv(target('0.5.12', [], true))).toEqual([
      ...HEAD,
      '--disable-cuda-graph',
      '--disable-radix-cache',
    ]);
    expect(renderServerArgv(target('0.5.23', [], true))).toEqual([
      ...HEAD,
      '--cuda-graph-backend-decode',
      'disabled',
      '--cuda-graph-backend-prefill',
      'disabled',
      '--disable-radix-cache',
    ]);
    // The spec's release wins over nothing; the capture's must agree with it.
    expect(() =>
      renderServerArgv({
        ...target('0.5.12', [], true),
        capture: { sglangVersion: '0.5.23', draftLayerIds: [1, 2, 3] },
      }),
    ).toThrow(/capture is set up for SGLang 0\.5\.23 but the launch renders for 0\.5\.12/);
  });
});
