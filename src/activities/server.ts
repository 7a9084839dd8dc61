/**
 * The model-server lifecycle: launch → await ready → smoke test → (acceptance gate) → stop.
 * Every answer is checked against the process aerie launched (incidents 1, 2, 5), and every
 * wait is watched: a dead process fails the waiting activity within one poll interval.
 */
import { withRunGpus } from '../config/gpus.js';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { ProcRecord } from '../hosts/host.js';
import { latestGeneration, AeriePyError } from '../stages/common/index.js';
import {
  keepStartupRecord,
  launchRelease,
  readJson,
  sameArgv,
  startedButUnrecorded,
  type SglangRelease,
} from './server-launches.js';
import {
  renderServerArgv,
  releaseNotes,
  serverLaunchEnv,
  benchmarkReadyArgs,
  type ServerLaunchSpec,
} from '../sglang/launch-argv.js';
import { legacyInfoRoutesFirst, readinessEndpoint } from '../sglang/releases.js';
import { baseServerSpec } from '../stages/launch-specs.js';
import {
  captureLaunchFixes,
  CaptureSetupError,
  resolveCapture,
  type ResolvedCapture,
} from '../stages/extract/index.js';
import { PHASE_ORDER, readPhase, lastLines, type ServerPhase } from '../sglang/log-phase.js';
import { SglangClient, acceptLengthOf } from '../sglang/client.js';
import { checkDrafterCompat } from '../sglang/drafter-check.js';
import {
  drafterRejectedMessage,
  early200Note,
  gateAcceptLength,
  notReadyMessage,
  readinessBeat,
  readinessVerdict,
  type GateSample,
  type ReadinessBeat,
} from '../sglang/readiness.js';
import {
  cancelRequested,
  expandEnv,
  fatal,
  keepHeartbeating,
  runPaths,
  type ActivityDeps,
  type RunRef,
} from './context.js';
import type { ServerLaunch, ServerReady, ServerRole } from './server-types.js';
import { confirmOurs, deathReport, describeHolder, pgidOf, portHolderOf, watchServer } from './server-watch.js';

export { deathReport } from './server-watch.js';

export type { ServerLaunch, ServerReady, ServerRole } from './server-types.js';

interface ServerStep extends RunRef {
  launch: ServerLaunch;
}

/** Bytes of log kept in memory for reading the phase; phases only move forward, so older text is not needed. */
const PHASE_WINDOW = 1 << 20;
/** Tokens per acceptance-gate request. */
const GATE_TOKENS = 256;

export function serverActivities({ hosts }: ActivityDeps) {
  return {
    async launchServer(
      input: RunRef & {
        role: ServerRole;
        drafterDir?: string;
        maxConcurrency?: number;
        extractPass?: 'aux' | 'final';
        sglang?: SglangRelease;
      },
    ): Promise<ServerLaunch> {
      const { config, runId, role } = input;
      const host = hosts.get(config);
      const paths = runPaths(host, runId);
      const prefix = `${runId}.server-${role}.`;
      const notes: string[] = [];
      const extract = config.stages.extract;
      if (role === 'extract' && extract.driver === 'specforge-offline') {
        throw fatal(
          'ConfigError',
          `the ${extract.driver} extract driver starts its own engine; aerie launches no extraction server for it`,
        );
      }

      const spec: ServerLaunchSpec = baseServerSpec(config, role);
      const release = await launchRelease(
        host,
        config,
        role === 'deploy' ? config.stages.deploy['speculative-algorithm'] : undefined,
        input.sglang,
      );
      if ('problem' in release) throw fatal('ConfigError', release.problem);
      spec.sglangVersion = release.version;
      // aerie's capture rides on the extraction launch: its package on PYTHONPATH, its flags on the line.
      let capture: ResolvedCapture | undefined;
      if (role === 'extract') {
        const mode =
          extract.driver === 'stock-server' ? (input.extractPass === 'final' ? 'stock-final' : 'stock-aux') : 'plugin';
        try {
          capture = await resolveCapture(host, config, runId, paths.hidden, mode, release);
        } catch (err) {
          if (err instanceof CaptureSetupError || err instanceof AeriePyError) throw fatal('ConfigError', err.message);
          throw err;
        }
        spec.capture = capture.spec;
        notes.push(...capture.notes);
      }
      let speculative: ServerLaunch['speculative'];
      if (role === 'deploy') {
        const d = config.stages.deploy;
        const draft = input.drafterDir;
        if (!draft)
          throw fatal(
            'ConfigError',
            'deploy needs a drafter: the train stage output or stages.deploy.draft-model-path',
          );
        const draftConfig = await readJson(host, `${draft}/config.json`);
        const refusal = checkDrafterCompat(d['speculative-algorithm'], draftConfig);
        if (refusal && !d['allow-algorithm-mismatch']) throw fatal('DrafterRejectedError', refusal);
        if (refusal)
          notes.push(
            `launched despite a drafter/algorithm mismatch (stages.deploy.allow-algorithm-mismatch, experiments only): ${refusal}`,
          );
        spec.speculative = {
          algorithm: d['speculative-algorithm'],
          draftModelPath: draft,
          numSteps: d['num-steps'],
          eagleTopk: d['eagle-topk'],
          numDraftTokens: d['num-draft-tokens'],
        };
        spec.maxRunningRequests = d['max-running-requests'];
        spec.specV2 = d['spec-v2'];
        if (input.maxConcurrency) {
          const ready = benchmarkReadyArgs(spec, input.maxConcurrency);
          Object.assign(spec, ready.spec);
          notes.push(...ready.notes);
        }
        speculative = { algorithm: d['speculative-algorithm'], draftModelPath: draft };
      }
      let argv: string[];
      try {
        argv = renderServerArgv(spec);
        notes.push(...releaseNotes(spec, config.server.env));
      } catch (err) {
        throw fatal('ConfigError', `cannot launch the ${role} server: ${(err as Error).message}`);
      }
      if (capture?.env) {
        // The plugin's own judge of the line (extra-args included): a launch it would refuse never starts.
        const fixes = await captureLaunchFixes(
          host,
          capture.py,
          capture.spec.sglangVersion,
          argv.slice(config.server.launcher.length),
        );
        if (fixes.length > 0)
          throw fatal(
            'ConfigError',
            `aerie's capture cannot run on this extraction launch: ${fixes.join('; ')}. Fix: change server.extra-args accordingly`,
          );
      }
      const made = (record: ProcRecord, reattached: boolean): ServerLaunch => ({
        role,
        launchId: record.launchId,
        host: record.host,
        port: spec.port,
        pid: record.pid,
        pgid: record.pgid,
        logPath: record.logPath,
        argv: record.argv,
        modelPath: spec.modelPath,
        tpSize: spec.tpSize,
        speculative,
        ...(capture ? { captureLayers: capture.spec.draftLayerIds } : {}),
        sglangVersion: release.version,
        sglangVersionHow: release.how,
        reattached,
        notes,
        watchMs: config.server.readiness['poll-interval'],
        record,
      });

      // A live launch of this role from an earlier attempt is re-attached, never duplicated.
      // One with another command line (the config changed) is ours to stop and replace.
      const latest = await latestGeneration(host, prefix);
      const latestState = latest ? (await host.procStatus(latest.record)).state : undefined;
      if (latest && latestState === 'alive') {
        if (sameArgv(latest.record.argv, argv)) return made(latest.record, true);
        await host.killGroup(latest.record, { graceMs: 15_000 });
        notes.push(
          `stopped ${latest.record.launchId} (pid ${latest.record.pid}): it ran another command line than this config asks for`,
        );
      } else if (latest && latestState === 'orphans') {
        // Its leader is gone but processes it started in sessions of their own still run (and may hold the GPUs).
        await host.killGroup(latest.record, { graceMs: 15_000 });
        notes.push(
          `stopped what ${latest.record.launchId} (pid ${latest.record.pid}) left running in sessions of their own`,
        );
      }
      const gen = latest ? latest.gen + 1 : 0;
      const holder = await portHolderOf(host, config.server.port);
      if (holder.listening && !(await startedButUnrecorded(host, `${prefix}${gen}`, holder.pgid))) {
        throw fatal(
          'PortInUseError',
          `port ${config.server.port} on ${host.name} is already held by ${describeHolder(holder)}; aerie did not start it and will not stop it. ` +
            `Free the port or set server.port`,
          { holderPid: holder.pid, holderCommand: holder.command },
        );
      }
      let env: Record<string, string>;
      try {
        env = serverLaunchEnv(expandEnv(withRunGpus(config, config.server.env)), capture?.env, spec);
      } catch (err) {
        if (err instanceof ApplicationFailure) throw err;
        throw fatal('ConfigError', (err as Error).message);
      }
      // The plugin refuses a dump folder that does not exist (py/aerie_hs/sglang_hook.py).
      if (capture) await host.mkdirp(capture.dumpDir);
      await host.mkdirp(paths.logs);
      const { record, reattached } = await host.spawnDetached(`${prefix}${gen}`, argv, {
        env,
        cwd: paths.root,
        logPath: `${paths.logs}/server-${role}-${gen}.log`,
      });
      return made(record, reattached);
    },

    async awaitServerReady(input: ServerStep): Promise<ServerReady> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const ctx = Context.current();
      const r = config.server.readiness;
      const pollMs = r['poll-interval'];
      // The endpoint that really generates on this release (releases.ts readinessEndpoint).
      const probe = readinessEndpoint(launch.sglangVersion, r.endpoint, config.server.env);
      const endpoint = probe.endpoint;
      const rules = { endpoint, budgetMs: r.budget, requireReadyLine: r['require-ready-line'] };
      // The budget runs from the launch, so a retried attempt (worker lost) does not restart it.
      const launchedAt = Date.parse(launch.record.startedAt);
      const t0 = Number.isFinite(launchedAt) ? launchedAt : Date.now();
      // A health probe on a loaded server may take up to SGLANG_HEALTH_CHECK_TIMEOUT (20 s); the watcher, not this timeout, notices a death.
      const client = new SglangClient(await host.httpBase(launch.port), {
        timeoutMs: 30_000,
        legacyRoutesFirst: legacyInfoRoutesFirst(launch.sglangVersion),
      });
      const beat: ReadinessBeat = { phase: 'starting', elapsedMs: Date.now() - t0, lastHttp: null, logOffset: 0 };
      const prev = ctx.info.heartbeatDetails as Partial<ReadinessBeat> | undefined;
      if (prev && typeof prev.logOffset === 'number' && PHASE_ORDER.includes(prev.phase as ServerPhase)) {
        // Continue where the previous attempt stopped reading.
        beat.logOffset = prev.logOffset;
        beat.phase = prev.phase as ServerPhase;
        beat.detail = prev.detail;
      }
      const stopBeat = keepHeartbeating(
        () => readinessBeat({ ...beat, elapsedMs: Date.now() - t0 }),
        Math.min(pollMs, 5000),
      );
      const notes: string[] = probe.note ? [probe.note] : [];
      let window = '';
      let early200 = false;
      const rank = (p: ServerPhase) => PHASE_ORDER.indexOf(p);
      /** Reads the log written since the last poll and moves the phase forward. */
      const readLog = async () => {
        const chunk = await host
          .tailFrom(launch.logPath, beat.logOffset)
          .catch(() => ({ data: '', offset: beat.logOffset }));
        beat.logOffset = chunk.offset;
        window = (window + chunk.data).slice(-PHASE_WINDOW);
        const seen = readPhase(window);
        if (rank(seen.phase) > rank(beat.phase) || (rank(seen.phase) === rank(beat.phase) && seen.detail)) {
          beat.phase = seen.phase;
          beat.detail = seen.detail;
        }
      };
      // The phase a dead server reached is read from its whole log, not from the last poll.
      const diedWhile = async () => {
        await readLog();
        return `exited while ${beat.phase}`;
      };
      try {
        return await watchServer(host, launch, { pollMs, what: diedWhile }, async (signal) => {
          for (;;) {
            await readLog();
            if ((await host.procStatus(launch.record)).state !== 'alive')
              throw await deathReport(host, launch, await diedWhile());
            const health = await client.health(endpoint, signal);
            beat.lastHttp = health.status;
            beat.elapsedMs = Date.now() - t0;
            ctx.heartbeat(readinessBeat(beat));
            const verdict = readinessVerdict(
              { http: health.status, phase: beat.phase, elapsedMs: beat.elapsedMs },
              rules,
            );
            if (verdict.kind === 'confirm') {
              await confirmOurs(host, client, launch, signal);
              return await keepStartupRecord(host, launch, endpoint, Date.now() - t0, notes);
            }
            if (verdict.kind === 'over-budget') {
              throw fatal(
                'ServerNotReady',
                notReadyMessage({
                  role: launch.role,
                  pid: launch.pid,
                  ...beat,
                  budgetMs: r.budget,
                  endpoint,
                  early200,
                }),
                { phase: beat.phase, lastHttp: beat.lastHttp, logPath: launch.logPath, logTail: lastLines(window, 50) },
              );
            }
            if (verdict.early200 && !early200) {
              early200 = true;
              notes.push(early200Note(endpoint, beat.phase));
            }
            await sleep(pollMs, signal);
          }
        });
      } finally {
        stopBeat();
      }
    },

    async smokeTest(input: ServerStep): Promise<{ text: string; completionTokens: number; elapsedMs: number }> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const client = new SglangClient(await host.httpBase(launch.port), { generateTimeoutMs: 5 * 60_000 });
      const started = Date.now();
      const stopBeat = keepHeartbeating(() => ({ smoke: 'greedy generation', elapsedMs: Date.now() - started }));
      try {
        return await watchServer(
          host,
          launch,
          { pollMs: launch.watchMs, what: () => 'died on its first generation' },
          async (signal) => {
            const r = await client.generate(
              {
                text: 'The capital of France is',
                sampling_params: { max_new_tokens: config.server.readiness['smoke-tokens'], temperature: 0 },
              },
              signal,
            );
            const tokens = r.meta_info?.completion_tokens ?? 0;
            if (!r.text || tokens <= 0)
              throw smokeFailure(launch, `the smoke generation returned no text (completion_tokens=${tokens})`);
            return { text: r.text, completionTokens: tokens, elapsedMs: Date.now() - started };
          },
        );
      } catch (err) {
        if (err instanceof ApplicationFailure || cancelRequested()) throw err;
        throw smokeFailure(launch, `the smoke generation failed on a live server: ${(err as Error).message}`);
      } finally {
        stopBeat();
      }
    },

    async acceptanceGate(
      input: ServerStep,
    ): Promise<{ acceptLength: number; perRequest: number[]; notes: string[]; warnings: string[] }> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const d = config.stages.deploy;
      const client = new SglangClient(await host.httpBase(launch.port), { generateTimeoutMs: 5 * 60_000 });
      const prompts = [
        'Explain how a hash map works.',
        'Write a haiku about the sea.',
        'List three uses of binary search.',
        'Why is the sky blue?',
      ];
      const samples: GateSample[] = [];
      const stopBeat = keepHeartbeating(() => ({
        gate: 'greedy requests',
        done: samples.length,
        of: d['acceptance-requests'],
      }));
      try {
        await watchServer(
          host,
          launch,
          { pollMs: launch.watchMs, what: () => 'died during the acceptance gate' },
          async (signal) => {
            for (let i = 0; i < d['acceptance-requests']; i++) {
              // Fixed-length greedy outputs: the first token comes from the prefill, not a verify step,
              // so short outputs would inflate the ratio (a drafter that accepts nothing reads 1.00 here).
              const r = await client.generate(
                {
                  text: prompts[i % prompts.length]!,
                  sampling_params: { max_new_tokens: GATE_TOKENS, temperature: 0, ignore_eos: true },
                },
                signal,
              );
              const a = r.meta_info ? acceptLengthOf(r.meta_info) : undefined;
              if (a === undefined)
                throw fatal(
                  'DrafterRejectedError',
                  'the server reports no speculative statistics (spec_verify_ct): is speculative decoding on?',
                );
              samples.push({
                acceptLength: a,
                completionTokens: r.meta_info.completion_tokens,
                verifyCt: r.meta_info.spec_verify_ct,
              });
            }
          },
        );
      } finally {
        stopBeat();
      }
      const perRequest = samples.map((s) => s.acceptLength);
      const acceptLength = gateAcceptLength(samples);
      if (acceptLength < d['acceptance-threshold']) {
        const forced =
          d['allow-algorithm-mismatch'] && launch.notes.some((n) => n.includes('allow-algorithm-mismatch'));
        throw fatal(
          'DrafterRejectedError',
          drafterRejectedMessage(
            acceptLength,
            d['acceptance-threshold'],
            forced ? d['speculative-algorithm'] : undefined,
          ),
          {
            perRequest,
            acceptLength,
          },
        );
      }
      const warnings = launch.warnings ?? [];
      const notes = [...launch.notes, ...warnings.map((w) => `server warning: ${w}`)];
      if (launch.startupRecord) notes.push(`server notes and warnings kept in ${launch.startupRecord}`);
      return { acceptLength, perRequest, notes, warnings };
    },

    async stopServer(
      input: ServerStep,
    ): Promise<{ signals: string[]; groupEmpty: boolean; gpuReleased: boolean | null; foreignGpuProcesses: number }> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const stopBeat = keepHeartbeating(() => ({ stopping: launch.launchId }));
      try {
        // GPU processes of our group, noted before the kill so their release can be awaited after it.
        const before = await host.gpuInventory();
        const ourGpuPids: number[] = [];
        for (const p of before.available ? before.processes : []) {
          if ((await pgidOf(host, p.pid)) === launch.pgid) ourGpuPids.push(p.pid);
        }
        const result = await host.killGroup(launch.record, { graceMs: 15_000 });
        let gpuReleased: boolean | null = null;
        let after = before;
        if (ourGpuPids.length > 0) {
          const deadline = Date.now() + 120_000;
          for (;;) {
            after = await host.gpuInventory();
            gpuReleased = !after.processes.some((p) => ourGpuPids.includes(p.pid));
            if (gpuReleased || Date.now() > deadline) break;
            await sleep(1000);
          }
        }
        return { ...result, gpuReleased, foreignGpuProcesses: after.processes.filter((p) => !p.ours).length };
      } finally {
        stopBeat();
      }
    },
  };
}

function smokeFailure(launch: ServerLaunch, message: string): ApplicationFailure {
  return fatal('SmokeTestFailed', `${launch.role} server pid ${launch.pid} passed its health check but ${message}`, {
    relaunch: true,
    logPath: launch.logPath,
  });
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
