/**
 * The speculative deployment through the real pipeline workflow: a forced EAGLE + EAGLE-3
 * drafter launch is caught by the acceptance gate at 1.00, and a benchmark-ready launch
 * records the --max-running-requests it set and the server's startup warnings with the run.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/temporal/dev-server.js';
import { faultConfig, launchRecords, only, runPipeline } from './harness.js';
import { useTemporalSuite } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-deploy-');

const EAGLE3_DRAFTER = join(process.cwd(), 'test', 'fixtures', 'eagle3-drafter');

describe('deploy: acceptance gate and benchmark-ready launch', () => {
  it('EAGLE with an EAGLE-3 drafter, forced with allow-algorithm-mismatch, fails the acceptance gate at 1.00', async () => {
    const workdir = join(suite.work, 'forced');
    const config = faultConfig(workdir, await freePort(), {}, (c) => {
      c.stages.deploy['speculative-algorithm'] = 'EAGLE';
      c.stages.deploy['draft-model-path'] = EAGLE3_DRAFTER;
      c.stages.deploy['allow-algorithm-mismatch'] = true;
    });
    const runId = `forced-${Date.now()}`;
    const run = await runPipeline(suite.t, config, runId);

    const preflight = only(run.activities, 'preflight')[0]!;
    expect(preflight.outcome).toBe('completed');
    expect(preflight.result.note).toMatch(
      /mismatch allowed by stages\.deploy\.allow-algorithm-mismatch \(experiments only\)/,
    );

    expect(run.error).toMatch(
      /^deploy failed: accept length 1\.00 is below 1\.3 \(stages\.deploy\.allow-algorithm-mismatch let EAGLE serve a drafter it cannot use\)/,
    );
    const [gate] = only(run.activities, 'acceptanceGate');
    expect(gate!.failure?.type).toBe('DrafterRejectedError');
    expect(gate!.failure?.nonRetryable).toBe(true);
    const perRequest = gate!.failure?.details?.perRequest as number[];
    expect(perRequest).toHaveLength(4);
    for (const a of perRequest) expect(a).toBeLessThan(1.01);
    expect(gate!.failure?.message).toMatch(/EAGLE instead of EAGLE3/);
    // The launch itself went ahead (as asked), with the mismatch noted, and was stopped after the gate.
    const [launch] = only(run.activities, 'launchServer').filter((l) => l.input.role === 'deploy');
    expect(launch!.result.argv).toEqual(expect.arrayContaining(['--speculative-algorithm', 'EAGLE']));
    expect(launch!.result.notes.join('\n')).toMatch(/launched despite a drafter\/algorithm mismatch/);
    expect(only(run.activities, 'stopServer').map((s) => s.input.launch.launchId)).toContain(
      `${runId}.server-deploy.0`,
    );
    expect(await launchRecords(workdir)).not.toContain(`${runId}.server-baseline.0`);
  }, 110_000);

  it('a sweep above 48 sets --max-running-requests, says so, and keeps the server warnings with the run', async () => {
    const workdir = join(suite.work, 'ready');
    const config = faultConfig(
      workdir,
      await freePort(),
      { SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION: 'false' },
      (c) => {
        c.stages.benchmark.concurrencies = [1, 64];
        c.stages.benchmark['prompts-per-level'] = 64;
        c.stages.benchmark.rounds = 1; // one round answers what this test asks; rounds are report-sweep's
        c.stages.benchmark.baseline = false;
        // Readiness through /health_generate, which still runs a generation when /health does not.
        c.server.readiness.endpoint = '/health_generate';
        // SGLang 0.5.12 (the oldest the extraction's capture runs on), which logs its spec v2 decision
        // under EAGLE3; 0.5.23 always runs spec v2 and prints nothing about it (sim/sglang/profile.ts specV2).
        c.server.launcher = [
          ...c.server.launcher.slice(0, c.server.launcher.indexOf('sglang') + 1),
          '--version',
          '0.5.12',
        ];
        c.server['sglang-version'] = '0.5.12';
      },
    );
    const runId = `ready-${Date.now()}`;
    const run = await runPipeline(suite.t, config, runId);
    expect(run.error).toBeUndefined();

    const note =
      /set --max-running-requests 64: with speculative decoding SGLang otherwise caps running requests at 48/;
    const [launch] = only(run.activities, 'launchServer').filter((l) => l.input.role === 'deploy');
    expect(launch!.result.argv.join(' ')).toContain('--max-running-requests 64');
    const [gate] = only(run.activities, 'acceptanceGate');
    expect(gate!.result.notes.join('\n')).toMatch(note);
    expect(gate!.result.warnings.join('\n')).toMatch(/Spec v2 is enabled by default/);
    expect(run.result?.report?.markdown).toMatch(note);
    expect(run.result?.report?.markdown).toMatch(/Spec v2 is enabled by default/);

    // Next to the log, in the run folder: what aerie set and what the server warned about.
    const logs = join(workdir, 'runs', runId, 'logs');
    const record = await readFile(join(logs, 'server-deploy-0.startup.md'), 'utf8');
    expect(record).toMatch(note);
    expect(record).toMatch(/## Server startup warnings\n- Spec v2 is enabled by default/);
    expect(record).toContain('(/health_generate 200, identity confirmed by server_info)');
    const log = await readFile(join(logs, 'server-deploy-0.log'), 'utf8');
    expect(log).not.toMatch(/Max running requests is reset to 48/);
    // The generate server (not speculative) has its record too, with no note about the cap.
    expect(await readFile(join(logs, 'server-generate-0.startup.md'), 'utf8')).not.toMatch(/max-running-requests/);
  }, 110_000);
});
