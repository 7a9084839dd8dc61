/**
 * The pipeline workflow's decisions, in seconds: the real workflow code (bundled from
 * src/workflows) on a real Worker in @temporalio/testing's local environment, against stub
 * activities (test/support/stub-activities.ts). Each test scripts what the activities say
 * and asserts what the workflow did about it: which activities it called, in which order,
 * on which server. The end-to-end tests (test/e2e/, test/faults/) cover the same decisions
 * against real processes; these say in seconds which decision broke.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import type { PipelineResult, RunStatus } from '../../src/shared.js';
import { SERVER_RELAUNCHABLE } from '../../src/sglang/readiness.js';
import { retryUpdate, statusQuery } from '../../src/workflows/index.js';
import { demoConfig } from '../support/demo-config.js';
import { failure, serve, StubActivities, untilCancelled } from '../support/stub-activities.js';
import { waitUntil } from '../support/temporal.js';
import { useWorkflowEnv, type PipelineHandle } from '../support/workflow-env.js';

const w = useWorkflowEnv();

/** The runs whose histories the replay test keeps: a relaunch, giving up, an operator's retry, a cancel (see test/fixtures/histories/README.md). */
const RECORDED = new Set(['load-ServerCrashed', 'inuse', 'dies', 'force', 'cancel-generateData']);

function withRun<T>(
  stubs: StubActivities,
  runId: string,
  config: Config,
  fn: (h: PipelineHandle) => Promise<T>,
): Promise<T> {
  return w.runPipeline(stubs, { runId, config, ...(RECORDED.has(runId) ? { record: `decision-${runId}` } : {}) }, fn);
}

function config(tweak: (c: Config) => void = () => undefined): Config {
  return demoConfig('/stub/work', 30000, tweak);
}

/** The run's failure as the client sees it: the workflow's own StageFailed message. */
async function failureOf(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  return (err as WorkflowFailedError).cause?.message ?? '';
}

/** Why the retry update's validator refused: the message the operator's `aerie retry` prints. */
async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e as { cause?: { message?: string } },
  );
  return err?.cause?.message ?? `not refused: ${String(err)}`;
}

/** The summaries the workflow gave its generate-server launches, from the run's history. */
async function launchSummaries(h: PipelineHandle): Promise<string[]> {
  const history = await h.fetchHistory();
  return (history.events ?? [])
    .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'launchServer')
    .map((e) => JSON.parse(Buffer.from(e.userMetadata?.summary?.data ?? []).toString('utf8')) as string)
    .filter((s) => s.includes('target'));
}

const states = (r: PipelineResult | RunStatus) => r.stages.map((s) => `${s.stage}:${s.state}`);

/** A fresh demo run, every stage doing its work (patched-server extract, baseline on the generate server). */
function freshRun(r: string): string[] {
  return [
    'preflight',
    'checkLedger generate',
    'launchServer generate',
    ...serve(`${r}.server-generate.0`, 'generateData', 'benchmarkSweep baseline'),
    'writeLedger generate',
    'checkLedger extract',
    'checkExtractSpace',
    'launchServer extract',
    ...serve(`${r}.server-extract.0`, 'extractHiddenStates'),
    'writeLedger extract',
    'checkLedger train',
    'trainDrafter',
    'writeLedger train',
    'checkLedger benchmark',
    'launchServer deploy',
    ...serve(`${r}.server-deploy.0`, 'acceptanceGate', 'benchmarkSweep eagle3'),
    'storedSweep baseline',
    'writeReport',
    'writeLedger benchmark',
  ];
}

describe('pipeline decisions against stub activities', { timeout: 30_000 }, () => {
  it('runs every stage in order on a fresh run, each server stopped when its stage ends', async () => {
    const stubs = new StubActivities();
    const result = await withRun(stubs, 'fresh', config(), (h) => h.result());
    expect(stubs.trace()).toEqual(freshRun('fresh'));
    expect(states(result)).toEqual([
      'preflight:done',
      'generate:done',
      'extract:done',
      'train:done',
      'deploy:done',
      'benchmark:done',
    ]);
    // Each stage is checked against the hash of the stage before it; every launch renders for preflight's release.
    const checks = stubs.calls
      .filter((c) => c.name === 'checkLedger')
      .map((c) => (c.input as { upstream: string[] }).upstream);
    expect(checks).toEqual([[], ['generate'], ['extract<generate'], ['train<extract<generate']]);
    for (const c of stubs.calls.filter((c) => c.name === 'launchServer'))
      expect((c.input as { sglang?: unknown }).sglang).toEqual({ version: '0.5.23', how: 'stub' });
    // The baseline was measured on the generate server, so the benchmark stage launches no baseline server.
    expect(stubs.launched).toEqual(['fresh.server-generate.0', 'fresh.server-extract.0', 'fresh.server-deploy.0']);
    expect(stubs.liveServers()).toEqual([]);
    expect(result.report?.paths).toEqual(['/stub/bench/report.md']);
  });

  it('skips every stage whose ledger record is valid, and redoes only a stage whose record is gone', async () => {
    const stubs = new StubActivities();
    await withRun(stubs, 'skip', config(), (h) => h.result());
    const before = stubs.calls.length;
    const again = await withRun(stubs, 'skip', config(), (h) => h.result());
    expect(stubs.trace().slice(before)).toEqual([
      'preflight',
      'checkLedger generate',
      'checkLedger extract',
      'checkLedger train',
      'checkLedger benchmark',
    ]);
    expect(states(again)).toEqual([
      'preflight:done',
      'generate:skipped',
      'extract:skipped',
      'train:skipped',
      'deploy:skipped',
      'benchmark:skipped',
    ]);
    expect(again.report?.paths).toEqual(['/stub/bench/report.md']);

    // No train record (as when its drafter was deleted): train runs again. The workflow trusts each
    // stage's own check, and the benchmark's record, keyed by train's inputs hash, not its outputs, still holds.
    stubs.ledger.delete('train');
    const mark = stubs.calls.length;
    const third = await withRun(stubs, 'skip', config(), (h) => h.result());
    expect(stubs.trace().slice(mark)).toEqual([
      'preflight',
      'checkLedger generate',
      'checkLedger extract',
      'checkLedger train',
      'trainDrafter',
      'writeLedger train',
      'checkLedger benchmark',
    ]);
    expect(states(third)).toEqual([
      'preflight:done',
      'generate:skipped',
      'extract:skipped',
      'train:done',
      'deploy:skipped',
      'benchmark:skipped',
    ]);
  });

  it.each(SERVER_RELAUNCHABLE)(
    'relaunches a server that dies while loading (%s): the dead one is stopped first',
    async (type) => {
      const stubs = new StubActivities().on('awaitServerReady', (_i, nth) => {
        if (nth === 1) throw failure(type, 'server exited with code 137 while loading');
        return { elapsedMs: 1, phase: 'ready', warnings: [], notes: [], startupRecord: '/stub/startup.json' };
      });
      const r = `load-${type}`;
      const { result, summaries } = await withRun(stubs, r, config(), async (h) => ({
        result: await h.result(),
        summaries: await launchSummaries(h),
      }));
      // What the Web UI and `aerie status` show for each launch.
      expect(summaries).toEqual([
        expect.not.stringContaining('relaunch'),
        expect.stringMatching(/^launch sglang target tp=1 on local:30000 \(relaunch 1 of 2\)$/),
      ]);
      expect(stubs.trace().slice(0, 11)).toEqual([
        'preflight',
        'checkLedger generate',
        'launchServer generate',
        `awaitServerReady ${r}.server-generate.0`,
        `stopServer ${r}.server-generate.0`,
        'launchServer generate',
        ...serve(`${r}.server-generate.1`, 'generateData', 'benchmarkSweep baseline'),
      ]);
      expect(states(result).every((s) => s.endsWith(':done'))).toBe(true);
      expect(stubs.liveServers()).toEqual([]);
    },
  );

  it('relaunches a server that dies while its stage uses it, and runs the stage activity again on the new one', async () => {
    const stubs = new StubActivities().on('extractHiddenStates', (_i, nth) => {
      if (nth === 1) throw failure('ServerCrashed', 'the extraction server died (exit 139) after 2 of 4 samples');
      return {
        hidden: { dir: '/stub/hidden', layout: 'specforge' },
        count: 4,
        bytes: 1,
        outputs: ['/stub/hidden'],
        note: '4 samples',
      };
    });
    await withRun(stubs, 'inuse', config(), (h) => h.result());
    const t = stubs.trace();
    const from = t.indexOf('launchServer extract');
    expect(t.slice(from, t.indexOf('writeLedger extract') + 1)).toEqual([
      'launchServer extract',
      ...serve('inuse.server-extract.0', 'extractHiddenStates'),
      'launchServer extract',
      ...serve('inuse.server-extract.1', 'extractHiddenStates'),
      'writeLedger extract',
    ]);
  });

  it('does not relaunch a server whose failure a relaunch cannot fix (out of memory): it stops it and the run fails', async () => {
    const stubs = new StubActivities().on('awaitServerReady', () => {
      throw failure('OutOfMemoryError', 'CUDA out of memory while loading. Fix: lower server.mem-fraction-static');
    });
    const message = await withRun(stubs, 'oom', config(), (h) => failureOf(h.result()));
    expect(message).toMatch(/^generate failed: CUDA out of memory/);
    expect(stubs.trace()).toEqual([
      'preflight',
      'checkLedger generate',
      'launchServer generate',
      'awaitServerReady oom.server-generate.0',
      'stopServer oom.server-generate.0',
    ]);
  });

  it('gives up after three launches of a server that keeps dying while loading', async () => {
    const stubs = new StubActivities().on('awaitServerReady', () => {
      throw failure('ServerCrashed', 'server exited with code 1 while loading');
    });
    const message = await withRun(stubs, 'dies', config(), (h) => failureOf(h.result()));
    expect(message).toMatch(/^generate failed: server exited with code 1 while loading/);
    const each = (n: number) => [
      'launchServer generate',
      `awaitServerReady dies.server-generate.${n}`,
      `stopServer dies.server-generate.${n}`,
    ];
    expect(stubs.trace()).toEqual(['preflight', 'checkLedger generate', ...each(0), ...each(1), ...each(2)]);
  });

  it('gives up after three servers that each die while the stage uses them', async () => {
    const stubs = new StubActivities().on('generateData', () => {
      throw failure('ServerCrashed', 'the server died during generation');
    });
    const message = await withRun(stubs, 'usedies', config(), (h) => failureOf(h.result()));
    expect(message).toMatch(/^generate failed: the server died during generation/);
    const each = (n: number) => ['launchServer generate', ...serve(`usedies.server-generate.${n}`, 'generateData')];
    expect(stubs.trace()).toEqual(['preflight', 'checkLedger generate', ...each(0), ...each(1), ...each(2)]);
    expect(stubs.liveServers()).toEqual([]);
  });
});

describe('operator decisions (run.on-failure: wait)', { timeout: 30_000 }, () => {
  const waitConfig = () => config((c) => (c.run['on-failure'] = 'wait'));
  const trainFailsOnce = () =>
    new StubActivities().on('trainDrafter', (_i, nth) => {
      if (nth === 1) throw failure('TrainerFailed', 'trainer exited with code 1: loss is NaN');
      return { drafterDir: '/stub/drafter', launches: 1, argv: ['train'], outputs: ['/stub/drafter'], note: 'trained' };
    });

  async function waitingAt(h: PipelineHandle, stage: string): Promise<RunStatus> {
    return waitUntil(
      async () => {
        const s = await h.query(statusQuery);
        return s.stages.find((x) => x.stage === stage)?.state === 'waiting' && s;
      },
      `${stage} waiting for an operator`,
      20_000,
      50,
    );
  }

  it('waits after a failure; refuses a retry from a later stage; a retry redoes the failed stage and what follows, skipping what is done', async () => {
    const stubs = trainFailsOnce();
    const result = await withRun(stubs, 'wait', waitConfig(), async (h) => {
      const status = await waitingAt(h, 'train');
      expect(status.stages.find((s) => s.stage === 'train')?.note).toMatch(
        /^failed: trainer exited with code 1: loss is NaN — fix the cause, then: aerie retry wait/,
      );
      expect(await refusal(h.executeUpdate(retryUpdate, { args: [{ stage: 'deploy' }] }))).toBe(
        'cannot retry from deploy: the run failed earlier, at train',
      );
      const mark = stubs.calls.length;
      expect(await h.executeUpdate(retryUpdate, { args: [{}] })).toBe('retrying wait from train');
      const r = await h.result();
      return { r, after: stubs.trace().slice(mark) };
    });
    expect(result.after).toEqual([
      'preflight',
      'checkLedger generate',
      'checkLedger extract',
      'checkLedger train',
      'trainDrafter',
      'writeLedger train',
      'checkLedger benchmark',
      'launchServer deploy',
      ...serve('wait.server-deploy.0', 'acceptanceGate', 'benchmarkSweep eagle3'),
      'storedSweep baseline',
      'writeReport',
      'writeLedger benchmark',
    ]);
    expect(states(result.r)).toEqual([
      'preflight:done',
      'generate:skipped',
      'extract:skipped',
      'train:done',
      'deploy:done',
      'benchmark:done',
    ]);
  });

  it('a retry from an earlier stage forces that stage and every later one, though their ledger records are valid', async () => {
    const stubs = trainFailsOnce();
    const result = await withRun(stubs, 'force', waitConfig(), async (h) => {
      await waitingAt(h, 'train');
      const mark = stubs.calls.length;
      expect(await h.executeUpdate(retryUpdate, { args: [{ stage: 'extract' }] })).toBe('retrying force from extract');
      const r = await h.result();
      return { r, after: stubs.trace().slice(mark) };
    });
    expect(result.after).toEqual([
      'preflight',
      'checkLedger generate',
      'checkLedger extract',
      'checkExtractSpace',
      'launchServer extract',
      ...serve('force.server-extract.1', 'extractHiddenStates'),
      'writeLedger extract',
      'checkLedger train',
      'trainDrafter',
      'writeLedger train',
      'checkLedger benchmark',
      'launchServer deploy',
      ...serve('force.server-deploy.0', 'acceptanceGate', 'benchmarkSweep eagle3'),
      'storedSweep baseline',
      'writeReport',
      'writeLedger benchmark',
    ]);
    expect(states(result.r)).toEqual([
      'preflight:done',
      'generate:skipped',
      'extract:done',
      'train:done',
      'deploy:done',
      'benchmark:done',
    ]);
  });

  it('a failure in a server stage stops the server before the run waits', async () => {
    const stubs = new StubActivities().on('generateData', (_i, nth) => {
      if (nth === 1)
        throw failure('DataIncomplete', 'only 2 of 4 samples came back. Fix: raise stages.generate.max-tokens');
      return {
        dataPath: '/stub/data/train.jsonl',
        counts: { samples: 4 },
        outputs: ['/stub/data/train.jsonl'],
        note: '4 samples',
      };
    });
    await withRun(stubs, 'srvwait', waitConfig(), async (h) => {
      await waitingAt(h, 'generate');
      expect(stubs.liveServers()).toEqual([]);
      expect(stubs.trace().at(-1)).toBe('stopServer srvwait.server-generate.0');
      await h.executeUpdate(retryUpdate, { args: [{}] });
      return h.result();
    });
    expect(stubs.launched).toContain('srvwait.server-generate.1');
  });
});

describe('cancel', { timeout: 30_000 }, () => {
  const points = [
    { during: 'readiness', activity: 'awaitServerReady', server: 'server-generate.0' },
    { during: 'generate', activity: 'generateData', server: 'server-generate.0' },
    { during: 'the benchmark sweep', activity: 'benchmarkSweep', server: 'server-deploy.0' },
  ] as const;

  it.each(points)(
    'a cancel during $during stops the live server and nothing runs after',
    async ({ activity, server, during }) => {
      const runId = `cancel-${activity}`;
      let started!: () => void;
      const running = new Promise<void>((r) => (started = r));
      const stubs = new StubActivities().on(activity, (i: { variant?: string }) => {
        // The baseline sweep on the generate server answers; the deploy server's sweep runs until cancelled.
        if (activity === 'benchmarkSweep' && i.variant === 'baseline') return { records: [], notes: [] };
        return untilCancelled(started);
      });
      await withRun(stubs, runId, config(), async (h) => {
        await running;
        expect(stubs.liveServers(), during).toEqual([`${runId}.${server}`]);
        // Not waiting for an operator: the retry update is refused while a stage runs.
        expect(await refusal(h.executeUpdate(retryUpdate, { args: [{}] }))).toMatch(
          /^run cancel-\w+ is not waiting for an operator/,
        );
        await h.cancel();
        const err = await h.result().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(WorkflowFailedError);
        expect((err as WorkflowFailedError).cause?.name).toBe('CancelledFailure');
      });
      expect(stubs.liveServers()).toEqual([]);
      const t = stubs.trace();
      // The live server stopped, then a last look for anything else of the run still running.
      expect(t.slice(-2)).toEqual([`stopServer ${runId}.${server}`, 'stopRunLeftovers']);
      expect(t.filter((x) => x.startsWith('stopServer')).length).toBe(stubs.launched.length);
    },
  );
});
