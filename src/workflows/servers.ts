/**
 * Model servers as the workflow sees them: launch → ready → smoke test, relaunch after a
 * death a fresh launch may fix, stop by process group, and stop everything still live when
 * the run fails or is cancelled.
 */
import { CancellationScope, isCancellation } from '@temporalio/workflow';
import type { ServerLaunch, ServerRole } from '../activities/server.js';
import type { SglangRelease } from '../activities/server-launches.js';
import { SERVER_RELAUNCHABLE } from '../failures.js';
import { activities } from './activities.js';
import type { RunRef } from '../activities/context.js';
import type { Config } from '../config/schema.js';
import type { HeartbeatingActivities } from './activities.js';
import type { Progress } from './progress.js';
import { failureMessage } from './failure.js';

/** How many times a server that dies on load or on its first request is relaunched. */
const SERVER_LAUNCHES = 3;

/** What a launch needs beyond its role: the drafter and sweep size to deploy, the stock extraction pass. */
export interface LaunchExtra {
  drafterDir?: string;
  maxConcurrency?: number;
  extractPass?: 'aux' | 'final';
  /** One of several servers with this role (a generate pool's): its launch ids never meet another's. */
  slot?: string;
}

/** What the servers need of the run (context.ts builds the Run that holds a Servers). */
export interface RunView {
  base: RunRef;
  config: Config;
  options: HeartbeatingActivities;
  progress: Progress;
  /** host:port of the model server, for summaries. */
  target: string;
}

export class Servers {
  private readonly live = new Map<string, ServerLaunch>();
  /** The host's SGLang release, read once by preflight; every launch renders for it. */
  sglang: SglangRelease | undefined;

  constructor(private readonly run: RunView) {}

  /**
   * launch → ready → smoke test. A server that dies while loading or on its first real
   * request (incident 2) is stopped by its process group and relaunched, a few times;
   * a failure no relaunch can fix (wrong interpreter, out of memory, port taken, budget
   * spent) ends the stage at once.
   */
  async start(role: ServerRole, extra: LaunchExtra = {}): Promise<ServerLaunch> {
    const { base, config, options, progress, target } = this.run;
    let lastError: unknown;
    for (let attempt = 1; attempt <= SERVER_LAUNCHES; attempt++) {
      const again = attempt > 1 ? ` (relaunch ${attempt - 1} of ${SERVER_LAUNCHES - 1})` : '';
      const srv = await activities.launchServer.executeWithOptions(
        {
          ...options.launch,
          summary: `launch sglang ${describeRole(role, config.stages.deploy['speculative-algorithm'])} tp=${config.server['tp-size']} on ${target}${again}`,
        },
        [{ ...base, role, ...extra, sglang: this.sglang }],
      );
      this.live.set(srv.launchId, srv);
      try {
        const ready = await activities.awaitServerReady.executeWithOptions(
          {
            ...options.readiness,
            summary: `await ready: ${role} server pid ${srv.pid} on ${target} (budget ${Math.round(config.server.readiness.budget / 1000)} s)`,
          },
          [{ ...base, launch: srv }],
        );
        const up: ServerLaunch = {
          ...srv,
          notes: [...srv.notes, ...ready.notes],
          warnings: ready.warnings,
          startupRecord: ready.startupRecord,
        };
        this.live.set(up.launchId, up);
        await activities.smokeTest.executeWithOptions(
          { ...options.smoke, summary: `smoke test: greedy generation on ${role} server pid ${srv.pid}` },
          [{ ...base, launch: up }],
        );
        return up;
      } catch (err) {
        lastError = err;
        // A cancelled run stops its servers on the way out (stopAll, after the failure).
        if (isCancellation(err)) throw err;
        await this.stop(srv);
        if (!relaunchable(err)) throw err;
        progress.say(`${role} server pid ${srv.pid} failed (${failureMessage(err).slice(0, 200)}); relaunching`);
      }
    }
    throw lastError;
  }

  async stop(srv: ServerLaunch): Promise<void> {
    const { base, options } = this.run;
    await activities.stopServer.executeWithOptions(
      { ...options.stop, summary: `stop ${srv.role} server pid ${srv.pid} (process group ${srv.pgid})` },
      [{ ...base, launch: srv }],
    );
    this.live.delete(srv.launchId);
  }

  /**
   * A server for the length of one stage. If the server dies while the stage uses it, the
   * stage's activity fails at once (whileServerLives); a relaunchable death gets a new
   * server and the stage activity runs again, resuming from what it saved.
   */
  async with<T>(role: ServerRole, use: (srv: ServerLaunch) => Promise<T>, extra: LaunchExtra = {}): Promise<T> {
    for (let launchNo = 1; ; launchNo++) {
      const srv = await this.start(role, extra);
      try {
        return await use(srv);
      } catch (err) {
        if (isCancellation(err) || !relaunchable(err) || launchNo >= SERVER_LAUNCHES) throw err;
        this.run.progress.say(
          `${role} server died while in use (${failureMessage(err).slice(0, 200)}); relaunching and resuming`,
        );
      } finally {
        await CancellationScope.nonCancellable(() => this.stop(srv));
      }
    }
  }

  /**
   * Leave no model server holding GPUs after a failure or a cancel; a crashed worker never
   * gets here, so its servers stay up for the next attempt to re-attach.
   */
  async stopAll(): Promise<void> {
    await CancellationScope.nonCancellable(async () => {
      for (const srv of [...this.live.values()]) await this.stop(srv).catch(() => undefined);
    });
  }
}

function describeRole(role: ServerRole, algorithm: string): string {
  if (role === 'deploy') return algorithm;
  if (role === 'extract') return 'extraction mode';
  return 'target';
}

/** A dead or broken server that a fresh launch of the same command may fix (see SERVER_RELAUNCHABLE). */
export function relaunchable(err: unknown): boolean {
  const type = (err as { cause?: { type?: string } }).cause?.type ?? '';
  return (SERVER_RELAUNCHABLE as readonly string[]).includes(type);
}
