/**
 * Older SGLang answered /health 200 as soon as uvicorn ran, before its warmup generation
 * succeeded. Through the real pipeline workflow, with a small stand-in for such a server
 * (old-sglang.mjs; aerie-sim models only the newer behaviour): aerie waits for the log's
 * ready line and says so, and without that guard the smoke test is what catches it.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/temporal/dev-server.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';
import { activityRuns, launchRecords, only, runPipeline } from './harness.js';
import { legacyDemoConfig } from '../support/demo-config.js';

const suite = useTemporalSuite('aerie-old-health-');

const OLD_SGLANG = fileURLToPath(new URL('./old-sglang.mjs', import.meta.url));
const READY_AFTER = 2500;

/** Cancels the run once the first smoke test has finished (the generate stage is not under test here). */
async function cancelAfterSmoke(handle: WorkflowHandle): Promise<void> {
  await waitUntil(
    async () => only(await activityRuns(handle), 'smokeTest').some((s) => s.outcome === 'completed'),
    'a smoke test to pass',
    60_000,
  );
  await handle.cancel();
}

function oldServerConfig(workdir: string, port: number, requireReadyLine: boolean) {
  // The legacy drivers: prepare_hidden_states runs its own target, so no extraction server needs
  // a release aerie's capture supports (preflight refuses 0.3.0 for that).
  return legacyDemoConfig(workdir, port, (c) => {
    c.server.env = { ...c.server.env, OLD_SGLANG_READY_AFTER_MS: String(READY_AFTER) };
    c.server.launcher = [process.execPath, OLD_SGLANG];
    // The stand-in reports 0.3.0 in its server_info, and aerie checks the release it launched for.
    c.server['sglang-version'] = '0.3.0';
    c.server.readiness.endpoint = '/health';
    c.server.readiness['poll-interval'] = 250;
    c.server.readiness.budget = 60_000;
    c.server.readiness['require-ready-line'] = requireReadyLine;
  });
}

describe('older SGLang: /health 200 while still warming up', () => {
  it('readiness waits for the ready line, notes the early 200, and the smoke test then passes', async () => {
    const workdir = join(suite.work, 'guarded');
    const runId = `old-${Date.now()}`;
    const run = await runPipeline(suite.t, oldServerConfig(workdir, await freePort(), true), runId, {
      during: cancelAfterSmoke,
    });

    const [ready] = only(run.activities, 'awaitServerReady');
    expect(ready!.outcome).toBe('completed');
    expect(ready!.result.elapsedMs).toBeGreaterThanOrEqual(READY_AFTER);
    expect(ready!.result.notes.join('\n')).toMatch(
      /\/health answered 200 while the log said "(starting|loading weights|weights loaded|warming up)"/,
    );
    expect(ready!.result.notes.join('\n')).toMatch(/\/health_generate is the reliable check/);
    expect(only(run.activities, 'smokeTest').map((s) => s.outcome)).toEqual(['completed']);
    expect(await launchRecords(workdir)).toEqual([`${runId}.server-generate.0`]);
    const record = await readFile(join(workdir, 'runs', runId, 'logs', 'server-generate-0.startup.md'), 'utf8');
    expect(record).toMatch(/\/health answered 200 while the log said/);
  }, 60_000);

  it('with the guard turned off, the early 200 is taken as ready and the smoke test catches it', async () => {
    const workdir = join(suite.work, 'unguarded');
    const runId = `old-off-${Date.now()}`;
    const run = await runPipeline(suite.t, oldServerConfig(workdir, await freePort(), false), runId);

    const ready = only(run.activities, 'awaitServerReady');
    expect(ready[0]!.outcome).toBe('completed');
    expect(ready[0]!.result.elapsedMs).toBeLessThan(READY_AFTER);
    const smoke = only(run.activities, 'smokeTest');
    expect(smoke[0]!.failure?.type).toBe('SmokeTestFailed');
    expect(smoke[0]!.failure?.message).toMatch(
      /passed its health check but the smoke generation failed on a live server: POST \/generate answered HTTP 503/,
    );
    // Relaunched per policy, each time too early, then the stage fails with the smoke test's words.
    expect(await launchRecords(workdir)).toEqual([0, 1, 2].map((g) => `${runId}.server-generate.${g}`));
    expect(run.error).toMatch(
      /^generate failed: generate server pid \d+ passed its health check but the smoke generation failed/,
    );
  }, 60_000);
});
