/**
 * What every activity shares: the worker's hosts, where a run's files live on its host,
 * heartbeats, and the failure types the workflow knows how to treat.
 */
import { Context, ApplicationFailure } from '@temporalio/activity';
import type { Config } from '../config/schema.js';
import type { FatalType, TransientType } from '../failures.js';
import type { Host } from '../hosts/host.js';
import type { HostPool } from '../hosts/index.js';
import { runDir } from '../shared.js';

export interface ActivityDeps {
  hosts: HostPool;
}

export interface RunRef {
  runId: string;
  config: Config;
}

/** What a ledgered stage's activity returns for its record: the paths it wrote and a line for people. */
export interface StageOutcome {
  outputs: string[];
  note: string;
}

/** Every path of a run on its host, in one place so activities agree. */
export function runPaths(host: Host, runId: string) {
  const root = runDir(host.workdir, runId);
  return {
    root,
    ledger: `${root}/.aerie/ledger`,
    logs: `${root}/logs`,
    data: `${root}/data`,
    hidden: `${root}/hidden_states`,
    train: `${root}/train`,
    bench: `${root}/bench`,
  };
}

/**
 * Heartbeat now and every intervalMs with the latest details; returns a stop function. Each
 * beat is a few bytes and the worker sends at most one a second, so the CLI and the Web UI
 * show progress that is never more than about a second old.
 */
export function keepHeartbeating(details: () => unknown, intervalMs = 1000): () => void {
  const ctx = Context.current();
  ctx.heartbeat(details());
  const timer = setInterval(() => ctx.heartbeat(details()), intervalMs);
  return () => clearInterval(timer);
}

/** A failure the workflow must not retry (src/failures.ts: retry 'never'): the message says what to change. */
export function fatal(type: FatalType, message: string, details?: Record<string, unknown>): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, details: details ? [details] : undefined });
}

/** A failure Temporal retries per the activity's policy (src/failures.ts: retry 'temporal'). */
export function transient(type: TransientType, message: string, details?: Record<string, unknown>): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: false, details: details ? [details] : undefined });
}

/**
 * ${VAR} in launch env values is expanded here, on the worker, at launch time: the workflow
 * history keeps the reference, never the secret.
 */
export function expandEnv(env: Record<string, string>, from: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    out[k] = v.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => {
      const value = from[name];
      if (value === undefined)
        throw fatal('ConfigError', `env ${k} refers to \${${name}}, which is not set on the worker`);
      return value;
    });
  }
  return out;
}

/** True when the activity was cancelled on purpose (not a worker shutdown or a timeout). */
export function cancelRequested(): boolean {
  try {
    return Context.current().cancellationDetails?.cancelRequested ?? false;
  } catch {
    return false;
  }
}
