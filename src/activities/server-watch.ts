/**
 * Is our model server alive, and is it ours? If the process dies — while it loads, on its
 * first request, or mid-stage — the waiting activity fails within one poll interval with
 * the server's log tail and a classification, instead of waiting out request timeouts
 * (incidents 2 and 5). And an answer on the port counts only if it comes from the process
 * group aerie launched and names what aerie launched (incident 1).
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Host, ProcRecord, ProcStatus } from '../hosts/host.js';
import { parseProcStat } from '../hosts/index.js';
import { SglangConnectionError, type SglangClient } from '../sglang/client.js';
import { checkServerIdentity } from '../sglang/identity.js';
import { reportedVersionProblem } from '../sglang/releases.js';
import { classifyServerFailure, lastLines } from '../sglang/log-phase.js';
import { deathFailureType, deathMessage } from '../sglang/readiness.js';
import { classifyVllmFailure, VllmClient } from '../engines/index.js';
import { fatal } from './context.js';
import type { ServerLaunch } from './server-types.js';

/** What the watcher needs to know about a launched server. */
export interface WatchedServer {
  role: string;
  pid: number;
  logPath: string;
  record: ProcRecord;
  /** How often the process is checked; the readiness poll interval from the config. */
  watchMs?: number;
  /** The engine whose log rules read its death; SGLang when absent. */
  engine?: 'sglang' | 'vllm';
}

/** The end of the log is read, not all of it: a server that served for hours has a long log. */
const TAIL_BYTES = 256 * 1024;
const TAIL_LINES = 50;

async function logTail(host: Host, path: string): Promise<string> {
  try {
    const size = (await host.stat(path))?.size ?? 0;
    const { data } = await host.tailFrom(path, Math.max(0, size - TAIL_BYTES));
    return lastLines(data, TAIL_LINES);
  } catch {
    return '';
  }
}

/**
 * Our process's status once it has had up to waitMs to finish exiting. A request can fail
 * a moment before the process is gone (connections drop first), so "alive" right after a
 * failed request is not yet an answer.
 */
export async function settledStatus(host: Host, record: ProcRecord, waitMs: number): Promise<ProcStatus> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const s = await host.procStatus(record);
    if (s.state !== 'alive' || Date.now() >= deadline) return s;
    await new Promise((r) => setTimeout(r, Math.min(100, Math.max(1, deadline - Date.now()))));
  }
}

/**
 * The failure for a server process that is gone: classified from its log tail, the last 50
 * lines in the details. nonRetryable, because retrying the activity cannot revive the
 * process; details.relaunch (and the type) tell the workflow whether a new launch can help.
 */
export async function deathReport(host: Host, server: WatchedServer, what: string): Promise<ApplicationFailure> {
  const status = await host.procStatus(server.record).catch((): ProcStatus => ({ state: 'gone' }));
  const tail = await logTail(host, server.logPath);
  const failure = server.engine === 'vllm' ? classifyVllmFailure(tail) : classifyServerFailure(tail);
  const { type, relaunch } = deathFailureType(failure);
  const exitCode =
    status.state === 'exited' || status.state === 'orphans' ? status.code : status.state === 'gone' ? null : undefined;
  const message = deathMessage({ role: server.role, pid: server.pid, what, exitCode, failure });
  return fatal(type, message, {
    kind: failure.kind,
    relaunch,
    interpreter: failure.interpreter,
    exitCode,
    logPath: server.logPath,
    logTail: tail,
  });
}

export interface WatchOptions {
  pollMs: number;
  /** How the death is described, e.g. "exited while loading weights", evaluated when it happens. */
  what: () => string | Promise<string>;
  /**
   * Also read the engine's health each poll (vLLM launches once ready; default on for them): a
   * vLLM API server outlives its dead engine core and answers /health 503, its process alive
   * (test/fixtures/real/vllm-0.32.0/aux-collapse.result.json), so the process check alone
   * would wait out every request's timeout.
   */
  engineHealth?: boolean;
}

/** A vLLM server whose process lives but whose engine is dead: /health answers 5xx. */
async function engineDead(host: Host, server: WatchedServer, signal: AbortSignal): Promise<boolean> {
  const port = (server as Partial<ServerLaunch>).port;
  if (server.engine !== 'vllm' || port === undefined) return false;
  const health = await new VllmClient(await host.httpBase(port), { timeoutMs: 10_000 })
    .health(signal)
    .catch(() => null);
  return health !== null && health.status !== null && health.status >= 500;
}

/**
 * Runs work(signal) while checking our process every pollMs. When the process dies the
 * signal aborts and the call fails with the death report; when work fails for any other
 * reason and the process turns out to be dead, the death report wins too.
 */
export async function watchServer<T>(
  host: Host,
  server: WatchedServer,
  opts: WatchOptions,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const stop = new AbortController();
  const done = new AbortController();
  const cancel = Context.current().cancellationSignal;
  const onCancel = () => stop.abort(cancel.reason);
  cancel.addEventListener('abort', onCancel, { once: true });
  let died: ApplicationFailure | undefined;

  const watcher = (async () => {
    while (!done.signal.aborted) {
      await pause(opts.pollMs, done.signal);
      if (done.signal.aborted) return;
      const s = await host.procStatus(server.record).catch(() => null);
      if (s && s.state !== 'alive') {
        died = await deathReport(host, server, await opts.what());
        stop.abort(died);
        return;
      }
      if (opts.engineHealth !== false && (await engineDead(host, server, done.signal))) {
        died = await deathReport(
          host,
          server,
          `${await opts.what()} (its engine died; the API server answers /health 503)`,
        );
        stop.abort(died);
        return;
      }
    }
  })();

  try {
    return await work(stop.signal);
  } catch (err) {
    if (died) throw died;
    // Our own verdicts (not ready, not ours, a cancel) are already the answer.
    if (err instanceof ApplicationFailure || cancel.aborted) throw err;
    // A dropped connection may be a process on its way out: give its exit a moment to be recorded.
    const settle = err instanceof SglangConnectionError ? Math.min(10_000, Math.max(2000, 2 * opts.pollMs)) : 0;
    if ((await settledStatus(host, server.record, settle)).state !== 'alive')
      throw died ?? (await deathReport(host, server, await opts.what()));
    if (opts.engineHealth !== false && (await engineDead(host, server, AbortSignal.timeout(15_000))))
      throw await deathReport(
        host,
        server,
        `${await opts.what()} (its engine died; the API server answers /health 503)`,
      );
    throw err;
  } finally {
    done.abort();
    cancel.removeEventListener('abort', onCancel);
    await watcher.catch(() => undefined);
  }
}

/** For stages that use a server: its death fails the stage at once (and the workflow may relaunch it). */
export async function whileServerLives<T>(
  host: Host,
  launch: WatchedServer,
  work: (signal: AbortSignal) => Promise<T>,
  pollMs = launch.watchMs ?? 2000,
): Promise<T> {
  return watchServer(host, launch, { pollMs, what: () => 'died while in use' }, work);
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

// ---- is it ours? -------------------------------------------------------------------

export interface PortHolder {
  listening: boolean;
  pid?: number;
  command?: string;
  /** The holder's process group, when /proc/<pid>/stat was readable. */
  pgid?: number;
}

/** Who listens on the port, with its process group so "ours" can be told from "someone else's". */
export async function portHolderOf(host: Host, port: number): Promise<PortHolder> {
  const h = await host.portHolder(port);
  if (!h.listening || h.pid === undefined) return h;
  const pgid = await pgidOf(host, h.pid);
  return pgid === undefined ? h : { ...h, pgid };
}

export function describeHolder(h: PortHolder): string {
  if (h.pid === undefined) return 'a process aerie cannot see (no permission to read its sockets)';
  const cmd = h.command ? ` (${h.command.length > 160 ? `${h.command.slice(0, 159)}…` : h.command})` : '';
  return `pid ${h.pid}${cmd}`;
}

/** The process group of a pid on the host, read from /proc (works the same over SSH). */
export async function pgidOf(host: Host, pid: number): Promise<number | undefined> {
  const stat = await host.exec(['cat', `/proc/${pid}/stat`], { timeoutMs: 10_000 }).catch(() => null);
  return stat && stat.code === 0 ? parseProcStat(stat.stdout.trim())?.pgrp : undefined;
}

/**
 * A 200 is only "ready" from the process we launched: the port's holder must be in our
 * process group, and server_info must name what we launched (incident 1) and the SGLang
 * release the launch was rendered for.
 */
/** Returns the release a vLLM server reports (GET /version); SGLang's is checked against the launch instead. */
export async function confirmOurs(
  host: Host,
  client: SglangClient,
  launch: ServerLaunch,
  signal: AbortSignal,
): Promise<string | undefined> {
  const holder = await portHolderOf(host, launch.port);
  if (holder.pgid !== undefined && holder.pgid !== launch.pgid) {
    throw fatal(
      'PortInUseError',
      `port ${launch.port} on ${host.name} answers, but the answer comes from ${describeHolder(holder)}, not from the ${launch.role} server aerie launched ` +
        `(pid ${launch.pid}, process group ${launch.pgid}); it is not ready and aerie will not stop that process`,
      { holderPid: holder.pid, holderCommand: holder.command },
    );
  }
  if (launch.engine === 'vllm') return confirmVllm(host, launch, holder, signal);
  const info = await client.serverInfo(signal);
  const problems = checkServerIdentity(info, {
    modelPath: launch.modelPath,
    port: launch.port,
    tpSize: launch.tpSize,
    speculativeAlgorithm: launch.speculative?.algorithm,
    draftModelPath: launch.speculative?.draftModelPath,
  });
  if (problems.length > 0) {
    const who = holder.pid !== undefined ? describeHolder(holder) : 'an unidentified process';
    throw fatal(
      'ServerMismatch',
      `port ${launch.port} answers (${who}) but not as the ${launch.role} server aerie launched: ${problems.join('; ')}`,
      {
        holderPid: holder.pid,
      },
    );
  }
  // Ours, but another release than the line was rendered for: the config is wrong, not the port.
  const wrongRelease = launch.sglangVersion
    ? reportedVersionProblem(launch.sglangVersion, launch.sglangVersionHow ?? 'server.sglang-version', info.version)
    : undefined;
  if (wrongRelease)
    throw fatal('ConfigError', `the ${launch.role} server (pid ${launch.pid}) is ours and up, and ${wrongRelease}`, {
      reported: info.version,
      expected: launch.sglangVersion,
    });
  return undefined;
}

/**
 * vLLM's identity: /v1/models must list the model aerie launched, by the path it was loaded
 * from (vLLM serves it under that name by default: --served-model-name falls back to --model,
 * vllm==0.32.0:vllm/entrypoints/openai/serving_models.py), and /version must answer, so a
 * leftover of another engine on the port is not taken for ours.
 */
async function confirmVllm(
  host: Host,
  launch: ServerLaunch,
  holder: PortHolder,
  signal: AbortSignal,
): Promise<string | undefined> {
  const client = new VllmClient(await host.httpBase(launch.port));
  const who = holder.pid !== undefined ? describeHolder(holder) : 'an unidentified process';
  let models: { id: string; root?: string }[];
  let version: string | undefined;
  try {
    models = await client.models(signal);
    version = await client.version(signal);
  } catch (err) {
    throw fatal(
      'ServerMismatch',
      `port ${launch.port} answers (${who}) but not as the vLLM ${launch.role} server aerie launched: ${(err as Error).message}`,
      { holderPid: holder.pid },
    );
  }
  const served = models.some((m) => m.root === launch.modelPath || m.id === launch.modelPath);
  if (!served)
    throw fatal(
      'ServerMismatch',
      `port ${launch.port} answers (${who}) but serves ${models.map((m) => m.root ?? m.id).join(', ') || 'no model'}, not ${launch.modelPath} as the ${launch.role} server aerie launched`,
      { holderPid: holder.pid },
    );
  return version;
}
