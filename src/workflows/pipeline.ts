/**
 * The EAGLE-3 drafter lifecycle as one durable workflow:
 *   preflight → generate → extract → train → deploy → benchmark
 * Each stage is skipped when its ledger record on the host is valid, so a resumed run
 * continues where it stopped. Orchestration only: every side effect is an activity.
 */
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  defineQuery,
  defineUpdate,
  isCancellation,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { ServerLaunch, ServerRole } from '../activities/server.js';
import type { SglangRelease } from '../activities/server-launches.js';
import type { LedgerCheck } from '../activities/ledger.js';
import type { BenchServingRecord } from '../bench/metrics.js';
import { STAGES, type PipelineInput, type PipelineResult, type RetryRequest, type RunStatus, type StageName } from '../shared.js';
import { acts, heartbeating, quick } from './activities.js';
import { SERVER_RELAUNCHABLE } from '../sglang/readiness.js';
import { renderStageMarkdown, StageBoard } from './status.js';
import { hiddenForTrain } from '../stages/launch-specs.js';
import { AerieStage } from './search-attributes.js';

export const statusQuery = defineQuery<RunStatus>('status');
/** Operator action after a failure the run waits on: re-run from the failed stage, or an earlier one. */
export const retryUpdate = defineUpdate<string, [RetryRequest]>('retry');

/** How many times a server that dies on load or on its first request is relaunched. */
const SERVER_LAUNCHES = 3;

export async function pipeline(input: PipelineInput): Promise<PipelineResult> {
  const { runId, config } = input;
  const board = new StageBoard(runId, config.run.label);
  setHandler(statusQuery, () => board.snapshot());
  const live = new Map<string, ServerLaunch>();
  // Operator state: set while the run waits after a failure; a retry names where to restart.
  let waitingOn: StageName | undefined;
  let retryFrom: StageName | undefined;
  let forceFrom: StageName | undefined;
  const forced = (stage: StageName) => forceFrom !== undefined && STAGES.indexOf(stage) >= STAGES.indexOf(forceFrom);
  setHandler(
    retryUpdate,
    (req) => {
      retryFrom = req.stage ?? waitingOn!;
      return `retrying ${runId} from ${retryFrom}`;
    },
    {
      validator: (req) => {
        if (!waitingOn) throw new Error(`run ${runId} is not waiting for an operator (it waits only after a failure, with run.on-failure: wait)`);
        if (req.stage !== undefined && !STAGES.includes(req.stage)) throw new Error(`unknown stage "${req.stage}"; stages: ${STAGES.join(', ')}`);
        if (req.stage !== undefined && STAGES.indexOf(req.stage) > STAGES.indexOf(waitingOn)) {
          throw new Error(`cannot retry from ${req.stage}: the run failed earlier, at ${waitingOn}`);
        }
      },
    },
  );
  const base = { runId, config };
  /** The host's SGLang release, read once by preflight; every launch renders for it. */
  let sglang: SglangRelease | undefined;
  // Histories started before the setting existed carry configs without it: the old 30 s.
  const { launch, readiness, smoke, stop, longRunning } = heartbeating(config.run['heartbeat-timeout']);
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
    if (check.valid && check.record && !forced(stage)) {
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
   * request (incident 2) is stopped by its process group and relaunched, a few times;
   * a failure no relaunch can fix (wrong interpreter, out of memory, port taken, budget
   * spent) ends the stage at once.
   */
  async function startServer(role: ServerRole, extra: { drafterDir?: string; maxConcurrency?: number } = {}): Promise<ServerLaunch> {
    let lastError: unknown;
    for (let attempt = 1; attempt <= SERVER_LAUNCHES; attempt++) {
      const again = attempt > 1 ? ` (relaunch ${attempt - 1} of ${SERVER_LAUNCHES - 1})` : '';
      const srv = await acts.launchServer.executeWithOptions(
        { ...launch, summary: `launch sglang ${describeRole(role, config.stages.deploy['speculative-algorithm'])} tp=${config.server['tp-size']} on ${target}${again}` },
        [{ ...base, role, ...extra, sglang }],
      );
      live.set(srv.launchId, srv);
      try {
        const ready = await acts.awaitServerReady.executeWithOptions(
          { ...readiness, summary: `await ready: ${role} server pid ${srv.pid} on ${target} (budget ${Math.round(config.server.readiness.budget / 1000)} s)` },
          [{ ...base, launch: srv }],
        );
        const up: ServerLaunch = { ...srv, notes: [...srv.notes, ...ready.notes], warnings: ready.warnings, startupRecord: ready.startupRecord };
        live.set(up.launchId, up);
        await acts.smokeTest.executeWithOptions({ ...smoke, summary: `smoke test: greedy generation on ${role} server pid ${srv.pid}` }, [{ ...base, launch: up }]);
        return up;
      } catch (err) {
        lastError = err;
        // A cancelled run stops its servers on the way out (the catch at the bottom).
        if (isCancellation(err)) throw err;
        await stopServer(srv);
        if (!relaunchable(err)) throw err;
        sayRunning(`${role} server pid ${srv.pid} failed (${failureMessage(err).slice(0, 200)}); relaunching`);
      }
    }
    throw lastError;
  }

  async function stopServer(srv: ServerLaunch): Promise<void> {
    await acts.stopServer.executeWithOptions({ ...stop, summary: `stop ${srv.role} server pid ${srv.pid} (process group ${srv.pgid})` }, [{ ...base, launch: srv }]);
    live.delete(srv.launchId);
  }

  /**
   * A server for the length of one stage. If the server dies while the stage uses it, the
   * stage's activity fails at once (whileServerLives); a relaunchable death gets a new
   * server and the stage activity runs again, resuming from what it saved.
   */
  async function withServer<T>(role: ServerRole, use: (srv: ServerLaunch) => Promise<T>, extra = {}): Promise<T> {
    for (let launchNo = 1; ; launchNo++) {
      const srv = await startServer(role, extra);
      try {
        return await use(srv);
      } catch (err) {
        if (isCancellation(err) || !relaunchable(err) || launchNo >= SERVER_LAUNCHES) throw err;
        sayRunning(`${role} server died while in use (${failureMessage(err).slice(0, 200)}); relaunching and resuming`);
      } finally {
        await CancellationScope.nonCancellable(() => stopServer(srv));
      }
    }
  }

  /** Updates the running stage's note in the Web UI's stage table. */
  function sayRunning(note: string): void {
    const stage = board.current;
    if (!stage || board.get(stage).state !== 'running') return;
    board.get(stage).note = note;
    show();
  }

  for (;;) {
    try {
      enter('preflight');
      const pre = await acts.preflight.executeWithOptions({ ...quick, summary: `preflight: hosts, interpreter, ports, drafter config` }, [base]);
      finish('preflight', pre.note);
      // The SpecForge revision preflight found (or the config pinned) decides the drivers' flags,
      // resume and final-save handling; an activity result, so replays read the same value.
      const revision = { specforge: pre.specforge };
      sglang = pre.sglang;

      const data = await ledgered('generate', [], () =>
        withServer('generate', async (srv) => {
          const r = await acts.generateData.executeWithOptions(
            { ...longRunning, summary: `regenerate ${config.stages.generate['num-samples'] ?? 'all'} samples with the target (concurrency ${config.stages.generate.concurrency})` },
            [{ ...base, launch: srv }],
          );
          // The target alone is already loaded: measure the baseline now and save a model load later.
          const b = config.stages.benchmark;
          if (b.baseline && b['reuse-generate-server']) {
            await sweep(srv, 'baseline').catch((err: unknown) => {
              if (isCancellation(err)) throw err;
              sayRunning(`baseline on the generate server failed (${failureMessage(err).slice(0, 160)}); it will be measured in the benchmark stage`);
            });
          }
          return { result: r, outputs: r.outputs, note: r.note };
        }),
      );

      const extract = config.stages.extract;
      const hidden = await ledgered('extract', [data.inputsHash], async () => {
        // Refused before any launch when the destination cannot hold the estimate.
        const space = await acts.checkExtractSpace.executeWithOptions(
          { ...quick, startToCloseTimeout: '1h', heartbeatTimeout: '2m', summary: `extract: estimate hidden-state bytes against free space` },
          [{ ...base, dataPath: data.dataPath }],
        );
        // SpecForge's prepare_hidden_states.py loads the target itself: no model server.
        if (extract.driver === 'specforge-offline') {
          const r = await acts.extractOffline.executeWithOptions(
            { ...longRunning, summary: `extract hidden states (specforge-offline, tp ${extract['tp-size']}; ${space.note}): ${extract.launcher.join(' ')} …` },
            [{ ...base, ...revision, dataPath: data.dataPath }],
          );
          return { result: r, outputs: r.outputs, note: r.note };
        }
        // Stock SGLang returns either the aux states or the final one: one launch per pass.
        if (extract.driver === 'stock-server') {
          const aux = await withServer(
            'extract',
            (srv) =>
              acts.extractHiddenStates.executeWithOptions(
                { ...longRunning, summary: `extract hidden states, stock SGLang aux pass (aerie's client on the host; ${space.note})` },
                [{ ...base, launch: srv, dataPath: data.dataPath, pass: 'aux' }],
              ),
            { extractPass: 'aux' },
          );
          sayRunning(aux.note);
        }
        const pass = extract.driver === 'stock-server' ? ('final' as const) : undefined;
        return withServer(
          'extract',
          async (srv) => {
            const r = await acts.extractHiddenStates.executeWithOptions(
              {
                ...longRunning,
                summary: pass
                  ? `extract hidden states, stock SGLang final pass, SpecForge files; ${space.note}`
                  : `extract hidden states (aerie's capture in SGLang, dumps in ${extract['dump-dir']}, SpecForge files; ${space.note})`,
              },
              [{ ...base, launch: srv, dataPath: data.dataPath, ...(pass ? { pass } : {}) }],
            );
            return { result: r, outputs: r.outputs, note: r.note };
          },
          pass ? { extractPass: pass } : {},
        );
      });

      const train = config.stages.train;
      // SpecForge's trainers read only SpecForge's layout (offline extraction); aerie's own dump
      // layout goes to a command-template trainer. Otherwise SpecForge trains online.
      const trainHidden = hiddenForTrain(config, hidden.hidden);
      const drafter = await ledgered('train', [hidden.inputsHash], async () => {
        const r = await acts.trainDrafter.executeWithOptions(
          {
            ...longRunning,
            summary:
              `train EAGLE-3 drafter (${train.driver}${train.driver === 'command' ? '' : `, ${train['num-epochs']} epochs`}): ` +
              `${train.launcher.join(' ')} … ${trainHidden ? `offline from ${trainHidden.layout} hidden states` : 'online'}`,
          },
          [{ ...base, ...revision, dataPath: data.dataPath, hidden: trainHidden }],
        );
        return { result: r, outputs: r.outputs, note: r.note };
      });

      const drafterDir = config.stages.deploy['draft-model-path'] ?? drafter.drafterDir;
      const maxConcurrency = Math.max(...config.stages.benchmark.concurrencies);
      const benchCheck = await acts.checkLedger.executeWithOptions({ ...quick, summary: 'ledger: is benchmark already done?' }, [
        { ...base, stage: 'benchmark', upstream: [drafter.inputsHash] },
      ]);
      let report: PipelineResult['report'];
      if (benchCheck.valid && benchCheck.record && !forced('deploy') && !forced('benchmark')) {
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
        let specNotes: string[];
        try {
          ({ records: speculative, notes: specNotes } = await sweep(srv, 'eagle3'));
        } finally {
          await CancellationScope.nonCancellable(() => stopServer(srv));
        }
        let baseline: BenchServingRecord[] | undefined;
        if (config.stages.benchmark.baseline) {
          // Levels measured earlier (on the generate server, or before a crash) are not measured again.
          const stored = await acts.storedSweep.executeWithOptions({ ...quick, summary: 'baseline levels already measured?' }, [{ ...base, variant: 'baseline' }]);
          baseline = stored.missing.length > 0 ? (await withServer('baseline', (b) => sweep(b, 'baseline'))).records : stored.records;
        }
        report = await acts.writeReport.executeWithOptions({ ...quick, summary: 'write report.md, report.html and results.jsonl' }, [
          { ...base, speculative, baseline, notes: [...gate.notes, ...specNotes] },
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
      if (config.run['on-failure'] !== 'wait' || !stage) {
        // The activity failure rides along as the cause: its details carry the log tail.
        throw ApplicationFailure.create({ message: `${stage ?? 'run'} failed: ${failureMessage(err)}`, type: 'StageFailed', nonRetryable: true, cause: err as Error });
      }
      // Wait for an operator: fix the cause on the host, then `aerie retry` (or `aerie cancel`).
      waitingOn = stage;
      board.set(stage, 'waiting', `failed: ${failureMessage(err).slice(0, 300)} — fix the cause, then: aerie retry ${runId} [--stage S]`, now());
      show();
      await condition(() => retryFrom !== undefined);
      forceFrom = retryFrom;
      board.reset(retryFrom!);
      board.error = undefined;
      waitingOn = undefined;
      retryFrom = undefined;
      show();
    }
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

/** A dead or broken server that a fresh launch of the same command may fix (see SERVER_RELAUNCHABLE). */
function relaunchable(err: unknown): boolean {
  const type = (err as { cause?: { type?: string } }).cause?.type ?? '';
  return (SERVER_RELAUNCHABLE as readonly string[]).includes(type);
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

