/**
 * The EAGLE-3 drafter lifecycle as one durable workflow:
 *   preflight → generate → extract → train → deploy → benchmark
 * Each stage is skipped when its ledger record on the host is valid, so a resumed run
 * continues where it stopped. Orchestration only: every side effect is an activity.
 */
import {
  ApplicationFailure,
  CancellationScope,
  defineQuery,
  isCancellation,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { ServerLaunch, ServerRole } from '../activities/server.js';
import type { LedgerCheck } from '../activities/ledger.js';
import type { BenchServingRecord } from '../bench/metrics.js';
import type { PipelineInput, PipelineResult, RunStatus, StageName } from '../shared.js';
import { acts, launch, longRunning, NON_RETRYABLE, quick, readiness, smoke } from './activities.js';
import { renderStageMarkdown, StageBoard } from './status.js';

export const statusQuery = defineQuery<RunStatus>('status');
export const AerieStage = defineSearchAttributeKey('AerieStage', SearchAttributeType.KEYWORD);

/** How many times a server that dies on load or on its first request is relaunched. */
const SERVER_LAUNCHES = 3;

export async function pipeline(input: PipelineInput): Promise<PipelineResult> {
  const { runId, config } = input;
  const board = new StageBoard(runId, config.run.label);
  setHandler(statusQuery, () => board.snapshot());
  const live = new Map<string, ServerLaunch>();
  const base = { runId, config };
  const target = `${config.target.host}:${config.server.port}`;

  const show = () => setCurrentDetails(renderStageMarkdown(board.snapshot()));
  const enter = (stage: StageName, note?: string) => {
    board.set(stage, 'running', note, now());
    upsertSearchAttributes([{ key: AerieStage, value: stage }]);
    show();
  };
  const finish = (stage: StageName, note: string, state: 'done' | 'skipped' = 'done') => {
    board.set(stage, state, note, now());
    show();
  };

  /** A stage whose finished work is recorded in the ledger: skipped when the record is still valid. */
  async function ledgered<T extends object>(
    stage: StageName,
    upstream: string[],
    body: () => Promise<{ result: T; outputs: string[]; note: string }>,
  ): Promise<T & { inputsHash: string }> {
    const check: LedgerCheck = await acts.checkLedger.executeWithOptions(
      { ...quick, summary: `ledger: is ${stage} already done?` },
      [{ ...base, stage, upstream }],
    );
    if (check.valid && check.record) {
      finish(stage, `already done (${check.record.finishedAt}): ${check.record.note}`, 'skipped');
      return { ...(check.record.result as T), inputsHash: check.inputsHash };
    }
    enter(stage, check.reason);
    const { result, outputs, note } = await body();
    await acts.writeLedger.executeWithOptions({ ...quick, summary: `ledger: record ${stage}` }, [
      { ...base, stage, inputsHash: check.inputsHash, outputs, result, note },
    ]);
    finish(stage, note);
    return { ...result, inputsHash: check.inputsHash };
  }

  /**
   * launch → ready → smoke test. A server that dies while loading or on its first real
   * request (incident 2) is stopped by its process group and relaunched, a few times.
   */
  async function startServer(role: ServerRole, extra: { drafterDir?: string; maxConcurrency?: number } = {}): Promise<ServerLaunch> {
    let lastError: unknown;
    for (let attempt = 1; attempt <= SERVER_LAUNCHES; attempt++) {
      const srv = await acts.launchServer.executeWithOptions(
        { ...launch, summary: `launch sglang ${describeRole(role, config.stages.deploy['speculative-algorithm'])} tp=${config.server['tp-size']} on ${target}` },
        [{ ...base, role, ...extra }],
      );
      live.set(srv.launchId, srv);
      try {
        await acts.awaitServerReady.executeWithOptions({ ...readiness, summary: `await ready: ${role} server pid ${srv.pid} on ${target}` }, [
          { ...base, launch: srv },
        ]);
        await acts.smokeTest.executeWithOptions({ ...smoke, summary: `smoke test: greedy generation on ${role} server` }, [{ ...base, launch: srv }]);
        return srv;
      } catch (err) {
        lastError = err;
        await stopServer(srv);
        if (isCancellation(err) || !retryable(err)) throw err;
      }
    }
    throw lastError;
  }

  async function stopServer(srv: ServerLaunch): Promise<void> {
    await acts.stopServer.executeWithOptions({ ...launch, summary: `stop ${srv.role} server (process group ${srv.pgid})` }, [{ ...base, launch: srv }]);
    live.delete(srv.launchId);
  }

  async function withServer<T>(role: ServerRole, use: (srv: ServerLaunch) => Promise<T>, extra = {}): Promise<T> {
    const srv = await startServer(role, extra);
    try {
      return await use(srv);
    } finally {
      await CancellationScope.nonCancellable(() => stopServer(srv));
    }
  }

  try {
    enter('preflight');
    const pre = await acts.preflight.executeWithOptions({ ...quick, summary: `preflight: hosts, interpreter, ports, drafter config` }, [base]);
    finish('preflight', pre.note);

    const data = await ledgered('generate', [], () =>
      withServer('generate', async (srv) => {
        const r = await acts.generateData.executeWithOptions(
          { ...longRunning, summary: `regenerate ${config.stages.generate['num-samples'] ?? 'all'} samples with the target (concurrency ${config.stages.generate.concurrency})` },
          [{ ...base, launch: srv }],
        );
        return { result: r, outputs: r.outputs, note: r.note };
      }),
    );

    const hidden = await ledgered('extract', [data.inputsHash], () =>
      withServer('extract', async (srv) => {
        const r = await acts.extractHiddenStates.executeWithOptions(
          { ...longRunning, summary: `extract hidden states (patched server, ${config.stages.extract['dump-env']})` },
          [{ ...base, launch: srv, dataPath: data.dataPath }],
        );
        return { result: r, outputs: r.outputs, note: r.note };
      }),
    );

    const drafter = await ledgered('train', [hidden.inputsHash], async () => {
      const r = await acts.trainDrafter.executeWithOptions(
        { ...longRunning, summary: `train EAGLE-3 drafter (${config.stages.train.driver}, ${config.stages.train['num-epochs']} epochs)` },
        // The patched server's dumps are not SpecForge's data_{i}.ckpt layout, so the trainer
        // runs online (no --train-hidden-states-path) until a conversion step exists.
        [{ ...base, dataPath: data.dataPath }],
      );
      return { result: r, outputs: r.outputs, note: r.note };
    });

    const drafterDir = config.stages.deploy['draft-model-path'] ?? drafter.drafterDir;
    const maxConcurrency = Math.max(...config.stages.benchmark.concurrencies);
    const benchCheck = await acts.checkLedger.executeWithOptions({ ...quick, summary: 'ledger: is benchmark already done?' }, [
      { ...base, stage: 'benchmark', upstream: [drafter.inputsHash] },
    ]);
    let report: PipelineResult['report'];
    if (benchCheck.valid && benchCheck.record) {
      finish('deploy', 'not needed: benchmark already done', 'skipped');
      finish('benchmark', `already done (${benchCheck.record.finishedAt})`, 'skipped');
      report = benchCheck.record.result as PipelineResult['report'];
    } else {
      enter('deploy', `EAGLE3 drafter ${drafterDir}`);
      const srv = await startServer('deploy', { drafterDir, maxConcurrency });
      const gate = await acts.acceptanceGate.executeWithOptions(
        { ...smoke, summary: `acceptance gate: accept length ≥ ${config.stages.deploy['acceptance-threshold']}` },
        [{ ...base, launch: srv }],
      );
      finish('deploy', `serving with accept length ${gate.acceptLength.toFixed(2)} on ${target}`);

      enter('benchmark', `sweep ${config.stages.benchmark.concurrencies.join(', ')}`);
      let speculative: BenchServingRecord[];
      try {
        speculative = (await sweep(srv, 'eagle3')).records;
      } finally {
        await CancellationScope.nonCancellable(() => stopServer(srv));
      }
      const baseline = config.stages.benchmark.baseline ? (await withServer('baseline', (b) => sweep(b, 'baseline'))).records : undefined;
      report = await acts.writeReport.executeWithOptions({ ...quick, summary: 'write report.md and results.jsonl' }, [
        { ...base, speculative, baseline, notes: gate.notes },
      ]);
      await acts.writeLedger.executeWithOptions({ ...quick, summary: 'ledger: record benchmark' }, [
        { ...base, stage: 'benchmark', inputsHash: benchCheck.inputsHash, outputs: report.paths, result: report, note: 'report written' },
      ]);
      finish('benchmark', `report: ${report.paths[0] ?? ''}`);
    }
    return { runId, stages: board.snapshot().stages, report };
  } catch (err) {
    const stage = board.current;
    if (stage) board.set(stage, 'failed', failureMessage(err), now());
    board.error = failureMessage(err);
    show();
    // Leave no model server holding GPUs after a failure or a cancel; a crashed worker
    // never gets here, so its servers stay up for the next attempt to re-attach.
    await CancellationScope.nonCancellable(async () => {
      for (const srv of [...live.values()]) await stopServer(srv).catch(() => undefined);
    });
    if (isCancellation(err)) throw err;
    throw ApplicationFailure.nonRetryable(`${stage ?? 'run'} failed: ${failureMessage(err)}`, 'StageFailed');
  }

  function sweep(srv: ServerLaunch, variant: 'eagle3' | 'baseline') {
    return acts.benchmarkSweep.executeWithOptions(
      { ...longRunning, summary: `benchmark ${variant}: concurrency ${config.stages.benchmark.concurrencies.join('/')}` },
      [{ ...base, launch: srv, variant }],
    );
  }
}

function now(): string {
  return new Date(Date.now()).toISOString();
}

function describeRole(role: ServerRole, algorithm: string): string {
  if (role === 'deploy') return algorithm;
  if (role === 'extract') return 'extraction mode';
  return 'target';
}

function retryable(err: unknown): boolean {
  const cause = (err as { cause?: { nonRetryable?: boolean; type?: string } }).cause;
  return !cause?.nonRetryable && !NON_RETRYABLE.includes(cause?.type ?? '');
}

/** The innermost failure message: what the activity said, not Temporal's wrapper text. */
export function failureMessage(err: unknown): string {
  let e = err as { message?: string; cause?: unknown } | undefined;
  let msg = e?.message ?? String(err);
  while (e?.cause) {
    e = e.cause as { message?: string; cause?: unknown };
    if (e?.message) msg = e.message;
  }
  return msg;
}

