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
];

const retry = (maximumAttempts: number) => ({
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumInterval: '30s',
  maximumAttempts,
  nonRetryableErrorTypes: NON_RETRYABLE,
});

export const quick: ActivityOptions = { startToCloseTimeout: '2m', retry: retry(5) };
export const launch: ActivityOptions = { startToCloseTimeout: '5m', heartbeatTimeout: '30s', retry: retry(5) };
/** Readiness: the poll budget lives in config; this bounds one attempt generously above it. */
export const readiness: ActivityOptions = { startToCloseTimeout: '2h', heartbeatTimeout: '30s', retry: retry(3) };
/** A server that fails its smoke test is stopped and relaunched by the workflow, not retried here. */
export const smoke: ActivityOptions = { startToCloseTimeout: '10m', heartbeatTimeout: '30s', retry: retry(1) };
export const longRunning: ActivityOptions = { startToCloseTimeout: '72h', heartbeatTimeout: '30s', retry: retry(20) };

export const acts = proxyActivities<Activities>(quick);
