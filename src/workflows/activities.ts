/**
 * Activity proxies with their timeouts and retry policies. Every long activity has a
 * short heartbeatTimeout so a lost worker is noticed in seconds, not hours.
 */
import { proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

/** Retrying cannot fix these: the run stops at once with a message that says what to change. */
export const NON_RETRYABLE = [
  'ConfigError',
  'PreflightFailed',
  'MissingDependencyError',
  'PortInUseError',
  'DrafterRejectedError',
  'OutOfMemoryError',
  'DataIncomplete',
  'ServerNotReady',
  'ServerMismatch',
  'ServerStartFailed',
];

const retry = (maximumAttempts: number) => ({
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumInterval: '30s',
  maximumAttempts,
  nonRetryableErrorTypes: NON_RETRYABLE,
});

export const quick: ActivityOptions = { startToCloseTimeout: '2m', retry: retry(5) };
/** Launching only spawns and records the process: seconds. A lost worker is retried and re-attaches. */
export const launch: ActivityOptions = { startToCloseTimeout: '5m', heartbeatTimeout: '30s', retry: retry(5) };
/**
 * Readiness: the poll budget lives in config and runs from the launch, so a retried attempt
 * continues the same launch; this bounds one attempt generously above any budget. A dead
 * server fails it as non-retryable: the workflow, not Temporal, decides about a relaunch.
 */
export const readiness: ActivityOptions = { startToCloseTimeout: '2h', heartbeatTimeout: '30s', retry: retry(3) };
/**
 * Smoke test and acceptance gate. Their verdicts on a server are non-retryable (a failed
 * server is stopped and relaunched by the workflow); retries only cover a lost worker.
 */
export const smoke: ActivityOptions = { startToCloseTimeout: '10m', heartbeatTimeout: '30s', retry: retry(3) };
/** Stopping: TERM, a grace period, KILL, then waiting for the GPUs to be released. */
export const stop: ActivityOptions = { startToCloseTimeout: '5m', heartbeatTimeout: '30s', retry: retry(5) };
export const longRunning: ActivityOptions = { startToCloseTimeout: '72h', heartbeatTimeout: '30s', retry: retry(20) };

export const acts = proxyActivities<Activities>(quick);
