/** The readiness rules and the words about a server's start, as pure functions. */
import { describe, expect, it } from 'vitest';
import type { ServerFailure } from '../../src/sglang/log-phase.js';
import {
  deathFailureType,
  deathMessage,
  drafterRejectedMessage,
  early200Note,
  gateAcceptLength,
  notReadyMessage,
  readinessBeat,
  readinessVerdict,
  renderStartupRecord,
  SERVER_RELAUNCHABLE,
  startupRecordPath,
  type ReadinessRules,
} from '../../src/sglang/readiness.js';

const rules: ReadinessRules = { endpoint: '/health', budgetMs: 10_000, requireReadyLine: true };

describe('readinessVerdict', () => {
  it('counts exactly 200 with the ready line as ready to confirm', () => {
    expect(readinessVerdict({ http: 200, phase: 'ready', elapsedMs: 1000 }, rules)).toEqual({ kind: 'confirm' });
  });

  it('waits on anything but exactly 200: 503, 204, a redirect, no answer', () => {
    for (const http of [503, 204, 301, 500, null]) {
      expect(readinessVerdict({ http, phase: 'ready', elapsedMs: 1000 }, rules)).toEqual({
        kind: 'wait',
        early200: false,
      });
    }
  });

  it('does not trust a 200 before the log says ready (older SGLang), unless told to', () => {
    expect(readinessVerdict({ http: 200, phase: 'warming up', elapsedMs: 1000 }, rules)).toEqual({
      kind: 'wait',
      early200: true,
    });
    expect(
      readinessVerdict({ http: 200, phase: 'loading weights', elapsedMs: 1000 }, { ...rules, requireReadyLine: false }),
    ).toEqual({ kind: 'confirm' });
  });

  it('gives up once the budget from the launch is spent, 200-without-ready-line included', () => {
    expect(readinessVerdict({ http: 503, phase: 'capturing cuda graphs', elapsedMs: 10_001 }, rules)).toEqual({
      kind: 'over-budget',
    });
    expect(readinessVerdict({ http: 200, phase: 'warming up', elapsedMs: 10_001 }, rules)).toEqual({
      kind: 'over-budget',
    });
    expect(readinessVerdict({ http: 200, phase: 'ready', elapsedMs: 10_001 }, rules)).toEqual({ kind: 'confirm' });
  });
});

describe('heartbeat details', () => {
  it('carry phase, elapsed, last HTTP status and log offset, with a short progress line', () => {
    const beat = readinessBeat({
      phase: 'loading weights',
      detail: 'x'.repeat(500),
      elapsedMs: 1234.6,
      lastHttp: 503,
      logOffset: 4096,
    });
    expect(Object.keys(beat).sort()).toEqual(['detail', 'elapsedMs', 'lastHttp', 'logOffset', 'phase']);
    expect(beat.elapsedMs).toBe(1235);
    expect(beat.detail!.length).toBe(120);
    expect(readinessBeat({ phase: 'starting', elapsedMs: 0, lastHttp: null, logOffset: 0 })).toEqual({
      phase: 'starting',
      elapsedMs: 0,
      lastHttp: null,
      logOffset: 0,
    });
  });
});

describe('messages', () => {
  it('a missed budget names the last phase, its progress line and the last status', () => {
    const msg = notReadyMessage({
      role: 'deploy',
      pid: 42,
      elapsedMs: 1_200_400,
      budgetMs: 1_200_000,
      phase: 'capturing cuda graphs',
      detail: 'Capturing batches (bs=8): 50% (2/4)',
      lastHttp: 503,
      endpoint: '/health',
      early200: false,
    });
    expect(msg).toBe(
      'deploy server pid 42 not ready after 1200 s (budget 1200 s); last phase from its log: capturing cuda graphs ' +
        '(Capturing batches (bs=8): 50% (2/4)); last /health status: 503. Raise server.readiness.budget if a load this slow is expected',
    );
    expect(
      notReadyMessage({
        role: 'generate',
        pid: 1,
        elapsedMs: 4100,
        budgetMs: 4000,
        phase: 'warming up',
        lastHttp: null,
        endpoint: '/health',
        early200: false,
      }),
    ).toMatch(
      /not ready after 4\.1 s \(budget 4\.0 s\); last phase from its log: warming up; last \/health status: no answer\. The weights loaded but the warmup generation never finished/,
    );
    expect(
      notReadyMessage({
        role: 'generate',
        pid: 1,
        elapsedMs: 5000,
        budgetMs: 4000,
        phase: 'warming up',
        lastHttp: 200,
        endpoint: '/health',
        early200: true,
      }),
    ).toMatch(/never said "The server is fired up and ready to roll!"; .*require-ready-line: false/);
  });

  it('a death names role, pid, what it was doing, the exit code and the interpreter', () => {
    const failure: ServerFailure = {
      kind: 'missing-module',
      retryable: false,
      interpreter: '/usr/bin/python3',
      message: '/usr/bin/python3 cannot run sglang.launch_server',
    };
    expect(deathMessage({ role: 'generate', pid: 7, what: 'exited while starting', exitCode: 1, failure })).toBe(
      'generate server pid 7 exited while starting (exit code 1): /usr/bin/python3 cannot run sglang.launch_server [interpreter: /usr/bin/python3]',
    );
    expect(
      deathMessage({
        role: 'deploy',
        pid: 7,
        what: 'died while in use',
        exitCode: null,
        failure: { kind: 'crash', retryable: true, message: 'boom' },
      }),
    ).toBe('deploy server pid 7 died while in use (exit status unknown): boom');
  });

  it('the early-200 note says what aerie did and what to configure', () => {
    expect(early200Note('/health', 'warming up')).toMatch(
      /^\/health answered 200 while the log said "warming up": .* \/health_generate is the reliable check/,
    );
  });

  it('the gate refusal names the likely causes and, when forced, the escape hatch', () => {
    expect(drafterRejectedMessage(1.0, 1.3)).toMatch(
      /^accept length 1\.00 is below 1\.3: .*EAGLE instead of EAGLE3.*eagle_aux_hidden_state_layer_ids.*d2t/,
    );
    expect(drafterRejectedMessage(1.0039, 1.3, 'EAGLE')).toMatch(
      /^accept length 1\.00 is below 1\.3 \(stages\.deploy\.allow-algorithm-mismatch let EAGLE serve a drafter it cannot use\)/,
    );
  });
});

describe('classifying a death for the workflow', () => {
  it('relaunches generic crashes only; everything a relaunch cannot fix has its own type', () => {
    expect(deathFailureType({ kind: 'crash', retryable: true, message: '' })).toEqual({
      type: 'ServerCrashed',
      relaunch: true,
    });
    expect(deathFailureType({ kind: 'warmup-failed', retryable: true, message: '' })).toEqual({
      type: 'ServerCrashed',
      relaunch: true,
    });
    expect(deathFailureType({ kind: 'missing-module', retryable: false, message: '' })).toEqual({
      type: 'MissingDependencyError',
      relaunch: false,
    });
    expect(deathFailureType({ kind: 'out-of-memory', retryable: false, message: '' })).toEqual({
      type: 'OutOfMemoryError',
      relaunch: false,
    });
    expect(deathFailureType({ kind: 'port-in-use', retryable: false, message: '' })).toEqual({
      type: 'PortInUseError',
      relaunch: false,
    });
    expect(deathFailureType({ kind: 'warmup-failed', retryable: false, message: '' })).toEqual({
      type: 'ServerStartFailed',
      relaunch: false,
    });
    expect([...SERVER_RELAUNCHABLE]).toEqual(['ServerCrashed', 'SmokeTestFailed']);
  });
});

describe('acceptance gate arithmetic', () => {
  it('weights by tokens when verify counts are known, else averages the per-request lengths', () => {
    expect(
      gateAcceptLength([
        { acceptLength: 3, completionTokens: 300, verifyCt: 100 },
        { acceptLength: 1, completionTokens: 10, verifyCt: 10 },
      ]),
    ).toBeCloseTo(310 / 110);
    expect(
      gateAcceptLength([
        { acceptLength: 3, completionTokens: 300 },
        { acceptLength: 1, completionTokens: 10 },
      ]),
    ).toBe(2);
    // A drafter that accepts nothing, over 256-token outputs: the prefill token barely shows.
    expect(gateAcceptLength([{ acceptLength: 256 / 255, completionTokens: 256, verifyCt: 255 }]).toFixed(2)).toBe(
      '1.00',
    );
  });
});

describe('the startup record kept with the run', () => {
  it('lists the command, what aerie set, and the server warnings', () => {
    const text = renderStartupRecord({
      launchId: 'r.server-deploy.0',
      argv: ['python3', '-m', 'sglang.launch_server', '--max-running-requests', '64'],
      readyAfterMs: 312_000,
      endpoint: '/health',
      notes: ['set --max-running-requests 64: ...'],
      warnings: [],
    });
    expect(text).toBe(
      [
        '# r.server-deploy.0',
        '',
        'ready after 312 s (/health 200, identity confirmed by server_info)',
        '',
        '```',
        'python3 -m sglang.launch_server --max-running-requests 64',
        '```',
        '',
        '## What aerie set or noticed',
        '- set --max-running-requests 64: ...',
        '',
        '## Server startup warnings',
        '- (none)',
        '',
      ].join('\n'),
    );
    expect(startupRecordPath('/w/runs/r/logs/server-deploy-0.log')).toBe('/w/runs/r/logs/server-deploy-0.startup.md');
  });
});
