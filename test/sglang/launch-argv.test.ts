import { describe, expect, it } from 'vitest';
import {
  benchmarkReadyArgs,
  effectiveMaxRunningRequests,
  renderServerArgv,
  serverLaunchEnv,
  type ServerLaunchSpec,
} from '../../src/sglang/launch-argv.js';

const LAUNCHER = ['python3', '-m', 'sglang.launch_server'];

function target(over: Partial<ServerLaunchSpec> = {}): ServerLaunchSpec {
  return {
    launcher: LAUNCHER,
    modelPath: '/models/Llama-3.1-8B-Instruct',
    port: 30000,
    tpSize: 8,
    extraArgs: [],
    ...over,
  };
}

describe('renderServerArgv', () => {
  it('renders a plain target server with loopback host by default', () => {
    expect(renderServerArgv(target())).toEqual([
      'python3',
      '-m',
      'sglang.launch_server',
      '--model-path',
      '/models/Llama-3.1-8B-Instruct',
      '--host',
      '127.0.0.1',
      '--port',
      '30000',
      '--tp-size',
      '8',
    ]);
  });

  it('renders an EAGLE3 deployment with every knob, then extra-args verbatim', () => {
    const argv = renderServerArgv(
      target({
        launcher: ['/opt/sglang/.venv/bin/python', '-m', 'sglang.launch_server'],
        host: '127.0.0.2',
        port: 31000,
        tpSize: 1,
        memFractionStatic: 0.85,
        maxRunningRequests: 250,
        speculative: {
          algorithm: 'EAGLE3',
          draftModelPath: '/runs/r1/drafter',
          numSteps: 3,
          eagleTopk: 1,
          numDraftTokens: 4,
        },
        extraArgs: ['--trust-remote-code', '--decode-log-interval', '10'],
      }),
    );
    expect(argv).toEqual([
      '/opt/sglang/.venv/bin/python',
      '-m',
      'sglang.launch_server',
      '--model-path',
      '/models/Llama-3.1-8B-Instruct',
      '--host',
      '127.0.0.2',
      '--port',
      '31000',
      '--tp-size',
      '1',
      '--mem-fraction-static',
      '0.85',
      '--max-running-requests',
      '250',
      '--speculative-algorithm',
      'EAGLE3',
      '--speculative-draft-model-path',
      '/runs/r1/drafter',
      '--speculative-num-steps',
      '3',
      '--speculative-eagle-topk',
      '1',
      '--speculative-num-draft-tokens',
      '4',
      '--trust-remote-code',
      '--decode-log-interval',
      '10',
    ]);
  });

  it('leaves unset speculative knobs to SGLang (NEXTN without a draft path)', () => {
    expect(renderServerArgv(target({ speculative: { algorithm: 'NEXTN' } }))).toEqual([
      ...LAUNCHER,
      '--model-path',
      '/models/Llama-3.1-8B-Instruct',
      '--host',
      '127.0.0.1',
      '--port',
      '30000',
      '--tp-size',
      '8',
      '--speculative-algorithm',
      'NEXTN',
    ]);
  });

  it('renders the extraction profile with CUDA graphs and radix cache off', () => {
    expect(
      renderServerArgv(target({ extraction: true, memFractionStatic: 0.7, extraArgs: ['--skip-server-warmup'] })),
    ).toEqual([
      ...LAUNCHER,
      '--model-path',
      '/models/Llama-3.1-8B-Instruct',
      '--host',
      '127.0.0.1',
      '--port',
      '30000',
      '--tp-size',
      '8',
      '--mem-fraction-static',
      '0.7',
      '--disable-cuda-graph',
      '--disable-radix-cache',
      '--skip-server-warmup',
    ]);
  });

  it('refuses speculative decoding in extraction mode', () => {
    expect(() =>
      renderServerArgv(target({ extraction: true, speculative: { algorithm: 'EAGLE3', draftModelPath: '/d' } })),
    ).toThrow(/extraction mode cannot use speculative decoding/);
  });

  it('refuses extra-args that would override a flag aerie sets, in any spelling', () => {
    expect(() => renderServerArgv(target({ extraArgs: ['--port', '30001'] }))).toThrow(/extra-args sets --port/);
    expect(() => renderServerArgv(target({ extraArgs: ['--port=30001'] }))).toThrow(/extra-args sets --port/);
    expect(() => renderServerArgv(target({ extraArgs: ['--tp', '2'] }))).toThrow(/extra-args sets --tp-size/);
    expect(() => renderServerArgv(target({ extraArgs: ['--model', '/other'] }))).toThrow(
      /extra-args sets --model-path/,
    );
    // argparse's allow_abbrev: an abbreviation replaces aerie's value just the same.
    expect(() => renderServerArgv(target({ extraArgs: ['--tensor-p', '8'] }))).toThrow(
      /extra-args sets --tp-size \(--tensor-p, which argparse reads as --tp-size\)/,
    );
    expect(() => renderServerArgv(target({ memFractionStatic: 0.8, extraArgs: ['--mem-frac=0.9'] }))).toThrow(
      /extra-args sets --mem-fraction-static \(--mem-frac/,
    );
    expect(() => renderServerArgv(target({ extraArgs: ['--specul', 'EAGLE'] }))).toThrow(
      /speculative settings belong in stages.deploy/,
    );
    expect(() =>
      renderServerArgv(target({ memFractionStatic: 0.8, extraArgs: ['--mem-fraction-static', '0.9'] })),
    ).toThrow(/extra-args sets --mem-fraction-static/);
  });

  it('allows optional flags in extra-args when the spec leaves them unset', () => {
    const argv = renderServerArgv(
      target({ extraArgs: ['--mem-fraction-static', '0.9', '--max-running-requests', '300'] }),
    );
    expect(argv.slice(-4)).toEqual(['--mem-fraction-static', '0.9', '--max-running-requests', '300']);
  });

  it('refuses speculative flags in extra-args, which would bypass the drafter check', () => {
    expect(() => renderServerArgv(target({ extraArgs: ['--speculative-algorithm', 'EAGLE'] }))).toThrow(
      /extra-args sets --speculative-algorithm.*stages\.deploy/,
    );
    expect(() => renderServerArgv(target({ extraArgs: ['--speculative-num-steps=5'] }))).toThrow(
      /--speculative-num-steps/,
    );
  });

  it('refuses specs SGLang could not run as written', () => {
    expect(() => renderServerArgv(target({ port: 0 }))).toThrow(/port must be an integer from 1 to 65535/);
    expect(() => renderServerArgv(target({ tpSize: 0 }))).toThrow(/tpSize/);
    expect(() => renderServerArgv(target({ memFractionStatic: 1 }))).toThrow(/memFractionStatic/);
    expect(() => renderServerArgv(target({ launcher: [] }))).toThrow(/launcher/);
    expect(() => renderServerArgv(target({ speculative: { algorithm: 'EAGLE3' } }))).toThrow(
      /EAGLE3 needs a draft model path/,
    );
    expect(() => renderServerArgv(target({ speculative: { algorithm: 'STANDALONE' } }))).toThrow(
      /STANDALONE needs a draft model path/,
    );
    expect(() => renderServerArgv(target({ speculative: { algorithm: 'NGRAM', draftModelPath: '/d' } }))).toThrow(
      /NGRAM uses no draft model/,
    );
    expect(() => renderServerArgv(target({ speculative: { algorithm: 'EAGLE', numSteps: 2.5 } }))).toThrow(/numSteps/);
  });
});

describe('serverLaunchEnv', () => {
  it('copies the base env and makes Python write its log unbuffered', () => {
    const base = { HF_HOME: '/data/hf' };
    const env = serverLaunchEnv(base);
    expect(env).toEqual({ PYTHONUNBUFFERED: '1', HF_HOME: '/data/hf' });
    expect(env).not.toBe(base);
  });

  it('keeps an explicit PYTHONUNBUFFERED from the base env', () => {
    expect(serverLaunchEnv({ PYTHONUNBUFFERED: '0' }).PYTHONUNBUFFERED).toBe('0');
  });

  const capture = {
    pythonPath: '/data/aerie/aerie-py/0123456789ab',
    dumpDir: '/dev/shm/aerie-hs/r1',
    draftLayerIds: [1, 7, 13],
  };

  it("puts aerie's capture first on PYTHONPATH and names its dump folder and layers, without touching the input", () => {
    const base = { CUDA_VISIBLE_DEVICES: '0,1', PYTHONPATH: '/opt/extra' };
    const env = serverLaunchEnv(base, capture);
    expect(env).toEqual({
      PYTHONUNBUFFERED: '1',
      CUDA_VISIBLE_DEVICES: '0,1',
      PYTHONPATH: '/data/aerie/aerie-py/0123456789ab:/opt/extra',
      AERIE_HS_DUMP_DIR: '/dev/shm/aerie-hs/r1',
      AERIE_HS_AUX_LAYERS: '[1,7,13]',
    });
    expect(base).toEqual({ CUDA_VISIBLE_DEVICES: '0,1', PYTHONPATH: '/opt/extra' });
    expect(serverLaunchEnv({}, capture).PYTHONPATH).toBe('/data/aerie/aerie-py/0123456789ab');
  });

  it('accepts the same dump folder already in the base env and refuses a different one', () => {
    expect(serverLaunchEnv({ AERIE_HS_DUMP_DIR: '/dev/shm/aerie-hs/r1' }, capture).AERIE_HS_DUMP_DIR).toBe(
      '/dev/shm/aerie-hs/r1',
    );
    expect(() => serverLaunchEnv({ AERIE_HS_DUMP_DIR: '/tmp/elsewhere' }, capture)).toThrow(
      /server.env sets AERIE_HS_DUMP_DIR=\/tmp\/elsewhere, but extraction dumps to \/dev\/shm\/aerie-hs\/r1/,
    );
  });

  it('refuses an SGLANG_PLUGINS whitelist that leaves the capture out, and a relative dump folder', () => {
    expect(() => serverLaunchEnv({ SGLANG_PLUGINS: 'other' }, capture)).toThrow(
      /leaves out aerie's capture; add aerie_hs_capture/,
    );
    expect(serverLaunchEnv({ SGLANG_PLUGINS: 'other, aerie_hs_capture' }, capture).SGLANG_PLUGINS).toBe(
      'other, aerie_hs_capture',
    );
    expect(() => serverLaunchEnv({}, { ...capture, dumpDir: 'shm/x' })).toThrow(/absolute path/);
  });
});

describe('the capture on an extraction launch', () => {
  const extraction = (version: string) =>
    renderServerArgv(target({ extraction: true, capture: { sglangVersion: version, draftLayerIds: [1, 7, 13] } }));

  it('adds the 0.5.23 aux-capture flags with the draft ids after the extraction profile', () => {
    const argv = extraction('0.5.23');
    const at = argv.indexOf('--disable-radix-cache');
    expect(argv.slice(at + 1)).toEqual([
      '--enable-return-aux-hidden-states',
      '--speculative-algorithm',
      'EAGLE3',
      '--return-aux-hidden-state-layer-ids',
      '1',
      '7',
      '13',
    ]);
    // 0.5.23 deprecates --disable-cuda-graph for the per-phase backends (server_args.py:408-415).
    expect(argv.slice(at - 4, at)).toEqual([
      '--cuda-graph-backend-decode',
      'disabled',
      '--cuda-graph-backend-prefill',
      'disabled',
    ]);
    expect(argv).not.toContain('--disable-cuda-graph');
  });

  it('adds no flag on 0.5.12, where the plugin turns the capture on itself', () => {
    const argv = extraction('0.5.12');
    expect(argv).toContain('--disable-radix-cache');
    expect(argv).toContain('--disable-cuda-graph');
    expect(argv.some((a) => a.startsWith('--speculative') || a.includes('aux'))).toBe(false);
  });

  it('refuses a release the capture is not written for, a non-extraction launch and a bad layer list', () => {
    expect(() => extraction('0.5.4')).toThrow(/supports SGLang 0.5.12 and 0.5.23, not 0.5.4/);
    expect(() => renderServerArgv(target({ capture: { sglangVersion: '0.5.23', draftLayerIds: [1, 7, 13] } }))).toThrow(
      /only on an extraction launch/,
    );
    expect(() =>
      renderServerArgv(target({ extraction: true, capture: { sglangVersion: '0.5.23', draftLayerIds: [1, 7] } })),
    ).toThrow(/three layer ids/);
  });
});

describe('benchmarkReadyArgs (incident 7)', () => {
  const eagle3 = target({ speculative: { algorithm: 'EAGLE3', draftModelPath: '/runs/r1/drafter' } });

  it('sets --max-running-requests to the sweep maximum for a speculative server, with a note', () => {
    const { spec, notes } = benchmarkReadyArgs(eagle3, 250);
    expect(spec.maxRunningRequests).toBe(250);
    expect(eagle3.maxRunningRequests).toBeUndefined();
    expect(notes).toEqual([
      'set --max-running-requests 250: with speculative decoding SGLang otherwise caps running requests at 48 and queues the rest, ' +
        'but the benchmark goes up to concurrency 250',
    ]);
    expect(renderServerArgv(spec)).toContain('--max-running-requests');
    const argv = renderServerArgv(spec);
    expect(argv[argv.indexOf('--max-running-requests') + 1]).toBe('250');
  });

  it('leaves a sweep that stays within 48 alone', () => {
    expect(benchmarkReadyArgs(eagle3, 48)).toEqual({ spec: eagle3, notes: [] });
  });

  it('leaves a non-speculative server alone', () => {
    const plain = target();
    expect(benchmarkReadyArgs(plain, 250)).toEqual({ spec: plain, notes: [] });
  });

  it('respects --max-running-requests given in extra-args', () => {
    const withExtra = { ...eagle3, extraArgs: ['--max-running-requests', '300'] };
    expect(effectiveMaxRunningRequests(withExtra)).toBe(300);
    expect(benchmarkReadyArgs(withExtra, 250)).toEqual({ spec: withExtra, notes: [] });
  });

  it('keeps an explicit setting below the sweep maximum but says levels above it will queue', () => {
    const low = { ...eagle3, maxRunningRequests: 64 };
    const { spec, notes } = benchmarkReadyArgs(low, 100);
    expect(spec).toBe(low);
    expect(notes).toEqual([
      "--max-running-requests is 64, below the benchmark's highest concurrency 100: levels above 64 will queue on the server",
    ]);
  });
});
