/**
 * Is the launched server ready, and does it generate? awaitServerReady follows the log's
 * phases and the health endpoint that really generates on the release, within the budget from
 * the launch; smokeTest asks for one greedy generation. A death fails either within one poll.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { keepStartupRecord } from './server-launches.js';
import { legacyInfoRoutesFirst, readinessEndpoint } from '../sglang/releases.js';
import { PHASE_ORDER, readPhase, lastLines, type ServerPhase } from '../sglang/log-phase.js';
import { SglangClient } from '../sglang/client.js';
import { readVllmPhase, VllmClient } from '../engines/index.js';
import {
  early200Note,
  notReadyMessage,
  readinessBeat,
  readinessVerdict,
  type ReadinessBeat,
} from '../sglang/readiness.js';
import { sleep } from '../stages/common/index.js';
import { cancelRequested, fatal, keepHeartbeating, type ActivityDeps } from './context.js';
import type { ServerLaunch, ServerReady, ServerStep } from './server-types.js';
import { confirmOurs, deathReport, watchServer } from './server-watch.js';

/** Bytes of log kept in memory for reading the phase; phases only move forward, so older text is not needed. */
const PHASE_WINDOW = 1 << 20;

export function serverReadyActivities({ hosts }: ActivityDeps) {
  return {
    async awaitServerReady(input: ServerStep): Promise<ServerReady> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const ctx = Context.current();
      const r = config.server.readiness;
      const pollMs = r['poll-interval'];
      // The endpoint that really generates on this release (releases.ts readinessEndpoint).
      const vllm = launch.engine === 'vllm';
      // vLLM's /health answers 200 only while its engine core lives (vllm==0.32.0:vllm/entrypoints/serve/instrumentator/health.py);
      // the ready line and the smoke generation do the rest.
      const probe = vllm
        ? { endpoint: '/health' as const, note: undefined }
        : readinessEndpoint(launch.sglangVersion, r.endpoint, config.server.env);
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
        const seen = vllm ? readVllmPhase(window) : readPhase(window);
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
        return await watchServer(host, launch, { pollMs, what: diedWhile, engineHealth: false }, async (signal) => {
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
              const reported = await confirmOurs(host, client, launch, signal);
              if (reported) notes.push(`vLLM ${reported} (GET /version)`);
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
            if (launch.engine === 'vllm') {
              const c = await new VllmClient(client.baseUrl, { generateTimeoutMs: 5 * 60_000 }).complete(
                {
                  model: launch.modelPath,
                  prompt: 'The capital of France is',
                  maxTokens: config.server.readiness['smoke-tokens'],
                },
                signal,
              );
              if (!c.text || c.completionTokens <= 0)
                throw smokeFailure(
                  launch,
                  `the smoke completion returned no text (completion_tokens=${c.completionTokens})`,
                );
              return { text: c.text, completionTokens: c.completionTokens, elapsedMs: Date.now() - started };
            }
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
  };
}

function smokeFailure(launch: ServerLaunch, message: string): ApplicationFailure {
  return fatal('SmokeTestFailed', `${launch.role} server pid ${launch.pid} passed its health check but ${message}`, {
    relaunch: true,
    logPath: launch.logPath,
  });
}
