/**
 * The readiness decision and the words aerie uses about a server's start, as pure functions:
 * what one poll's observations mean, what a heartbeat carries, how a death is typed, and
 * what is written next to the server log. The activity (src/activities/server.ts) only
 * gathers observations and acts on these verdicts (incidents 1 and 5).
 */
import { FAILURES, SERVER_RELAUNCHABLE, type FatalType } from '../failures.js';
import type { ServerFailure, ServerPhase } from './log-phase.js';

export type HealthEndpoint = '/health' | '/health_generate';

export interface ReadinessRules {
  endpoint: HealthEndpoint;
  budgetMs: number;
  /**
   * Also require SGLang's "fired up and ready to roll" log line. Older SGLang answers /health
   * 200 as soon as uvicorn runs, before its warmup generation has succeeded.
   */
  requireReadyLine: boolean;
}

/** One poll, after the process was found alive. */
export interface ReadinessObservation {
  /** HTTP status of the health endpoint; null when nothing answered. */
  http: number | null;
  /** The furthest startup phase the server log shows. */
  phase: ServerPhase;
  /** Since the launch (not since this activity attempt): a retried attempt keeps the budget. */
  elapsedMs: number;
}

export type ReadinessVerdict =
  /** Poll again. early200: the endpoint said 200 although the log has not said ready. */
  | { kind: 'wait'; early200: boolean }
  /** Exactly 200 (and the ready line when required): now prove it is our server. */
  | { kind: 'confirm' }
  | { kind: 'over-budget' };

/** Exactly HTTP 200 counts; 2xx-but-not-200, redirects and errors do not (incident 1). */
export function readinessVerdict(o: ReadinessObservation, rules: ReadinessRules): ReadinessVerdict {
  if (o.http === 200) {
    if (!rules.requireReadyLine || o.phase === 'ready') return { kind: 'confirm' };
    if (o.elapsedMs > rules.budgetMs) return { kind: 'over-budget' };
    return { kind: 'wait', early200: true };
  }
  if (o.elapsedMs > rules.budgetMs) return { kind: 'over-budget' };
  return { kind: 'wait', early200: false };
}

/** What awaitServerReady heartbeats on every poll: small enough to read in the Web UI. */
export interface ReadinessBeat {
  phase: ServerPhase;
  /** The latest progress line of that phase, e.g. "Loading safetensors checkpoint shards: 50% (2/4)". */
  detail?: string;
  elapsedMs: number;
  lastHttp: number | null;
  logOffset: number;
}

export function readinessBeat(b: ReadinessBeat): ReadinessBeat {
  const out: ReadinessBeat = {
    phase: b.phase,
    elapsedMs: Math.round(b.elapsedMs),
    lastHttp: b.lastHttp,
    logOffset: b.logOffset,
  };
  if (b.detail) out.detail = b.detail.length > 120 ? `${b.detail.slice(0, 119)}…` : b.detail;
  return out;
}

function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

export function notReadyMessage(a: {
  role: string;
  pid: number;
  elapsedMs: number;
  budgetMs: number;
  phase: ServerPhase;
  detail?: string;
  lastHttp: number | null;
  endpoint: HealthEndpoint;
  early200: boolean;
}): string {
  const last = a.detail ? `${a.phase} (${a.detail})` : a.phase;
  let msg =
    `${a.role} server pid ${a.pid} not ready after ${seconds(a.elapsedMs)} (budget ${seconds(a.budgetMs)}); ` +
    `last phase from its log: ${last}; last ${a.endpoint} status: ${a.lastHttp ?? 'no answer'}`;
  if (a.early200) {
    msg +=
      `. ${a.endpoint} answered 200 but the log never said "The server is fired up and ready to roll!"; ` +
      `if the server's log level hides info lines, set server.readiness.require-ready-line: false`;
  } else if (a.phase === 'warming up') {
    msg += '. The weights loaded but the warmup generation never finished: a stuck scheduler or a hung first batch';
  } else {
    msg += '. Raise server.readiness.budget if a load this slow is expected';
  }
  return msg;
}

/** Said once, and kept with the run's records, when /health said 200 before the log said ready. */
export function early200Note(endpoint: HealthEndpoint, phase: ServerPhase): string {
  return (
    `${endpoint} answered 200 while the log said "${phase}": this SGLang answers health before its warmup generation ` +
    `has succeeded (older versions do). aerie waited for the "fired up and ready to roll" line; ` +
    `server.readiness.endpoint: /health_generate is the reliable check for this version`
  );
}

/**
 * Failure types of a dead server (declared in src/failures.ts). nonRetryable always (retrying
 * an activity cannot revive a process); `relaunch` says whether launching the same command
 * again can help — the workflow decides that from the type (SERVER_RELAUNCHABLE).
 */
export { SERVER_RELAUNCHABLE };

export function deathFailureType(f: ServerFailure): { type: FatalType; relaunch: boolean } {
  const type = deathType(f);
  return { type, relaunch: FAILURES[type].relaunch };
}

function deathType(f: ServerFailure): FatalType {
  if (f.retryable) return 'ServerCrashed';
  switch (f.kind) {
    case 'missing-module':
      return 'MissingDependencyError';
    case 'out-of-memory':
      return 'OutOfMemoryError';
    case 'port-in-use':
      return 'PortInUseError';
    default:
      return 'ServerStartFailed';
  }
}

export function deathMessage(a: {
  role: string;
  pid: number;
  what: string;
  exitCode?: number | null;
  failure: ServerFailure;
}): string {
  const code =
    a.exitCode === undefined ? '' : a.exitCode === null ? ' (exit status unknown)' : ` (exit code ${a.exitCode})`;
  const interp = a.failure.interpreter ? ` [interpreter: ${a.failure.interpreter}]` : '';
  return `${a.role} server pid ${a.pid} ${a.what}${code}: ${a.failure.message}${interp}`;
}

/**
 * The text kept next to a server's log: what aerie changed in the launch and what the server
 * warned about, so a benchmark's numbers can be read with them (incident 7).
 */
export function renderStartupRecord(r: {
  launchId: string;
  argv: string[];
  readyAfterMs: number;
  endpoint: HealthEndpoint;
  notes: string[];
  warnings: string[];
}): string {
  const list = (xs: string[]) => (xs.length === 0 ? ['- (none)'] : xs.map((x) => `- ${x}`));
  return [
    `# ${r.launchId}`,
    '',
    `ready after ${seconds(r.readyAfterMs)} (${r.endpoint} 200, identity confirmed by server_info)`,
    '',
    '```',
    r.argv.join(' '),
    '```',
    '',
    '## What aerie set or noticed',
    ...list(r.notes),
    '',
    '## Server startup warnings',
    ...list(r.warnings),
    '',
  ].join('\n');
}

/** logs/server-deploy-0.log → logs/server-deploy-0.startup.md */
export function startupRecordPath(logPath: string): string {
  return `${logPath.replace(/\.log$/, '')}.startup.md`;
}

/** One acceptance-gate request: SGLang's per-request accept length and the counts behind it. */
export interface GateSample {
  acceptLength: number;
  completionTokens: number;
  /** spec_verify_ct; absent in versions that report only spec_accept_length. */
  verifyCt?: number;
}

/** Token-weighted, as SGLang's running average is; the plain mean when verify counts are absent. */
export function gateAcceptLength(samples: GateSample[]): number {
  if (samples.length === 0) return NaN;
  const counted = samples.filter((s) => typeof s.verifyCt === 'number' && s.verifyCt > 0);
  if (counted.length === samples.length) {
    return counted.reduce((a, s) => a + s.completionTokens, 0) / counted.reduce((a, s) => a + s.verifyCt!, 0);
  }
  return samples.reduce((a, s) => a + s.acceptLength, 0) / samples.length;
}

/** forcedAlgorithm: set when stages.deploy.allow-algorithm-mismatch let a refused combination launch. */
export function drafterRejectedMessage(acceptLength: number, threshold: number, forcedAlgorithm?: string): string {
  const forced = forcedAlgorithm
    ? ` (stages.deploy.allow-algorithm-mismatch let ${forcedAlgorithm} serve a drafter it cannot use)`
    : '';
  return (
    `accept length ${acceptLength.toFixed(2)} is below ${threshold}${forced}: the drafter gives no real speedup. ` +
    `Likely causes: --speculative-algorithm EAGLE instead of EAGLE3 for an EAGLE-3 drafter, wrong eagle_aux_hidden_state_layer_ids, ` +
    `a missing d2t buffer, or an undertrained drafter`
  );
}
