/**
 * The workflow's handle on aerie's activities, and the options it calls them with: timeouts
 * and retry policies, each with its reason. Every long activity has a short heartbeatTimeout
 * (run.heartbeat-timeout) so a lost worker is noticed in seconds, not hours.
 */
import { proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { DEFAULT_HEARTBEAT_TIMEOUT_MS } from '../config/heartbeat.js';
import { NON_RETRYABLE } from '../failures.js';

/**
 * Retrying cannot fix these: the run stops at once with a message that says what to change.
 * Derived from src/failures.ts (its inRetryPolicy entries, in their order).
 */
export { NON_RETRYABLE };

const retry = (maximumAttempts: number) => ({
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumInterval: '30s',
  maximumAttempts,
  nonRetryableErrorTypes: NON_RETRYABLE,
});

/** An activity that answers in seconds and does not heartbeat: ledger, preflight, report. */
export const shortActivity: ActivityOptions = { startToCloseTimeout: '2m', retry: retry(5) };

/**
 * Options of the activities that heartbeat, for a run's run.heartbeat-timeout: how long a
 * lost worker goes unnoticed before the activity is retried on another.
 */
export function heartbeatingActivities(heartbeatTimeout: number = DEFAULT_HEARTBEAT_TIMEOUT_MS) {
  return {
    /** Launching only spawns and records the process: seconds. A lost worker is retried and re-attaches. */
    launch: { startToCloseTimeout: '5m', heartbeatTimeout, retry: retry(5) },
    /**
     * Readiness: the poll budget lives in config and runs from the launch, so a retried attempt
     * continues the same launch; this bounds one attempt generously above any budget. A dead
     * server fails it as non-retryable: the workflow, not Temporal, decides about a relaunch.
     */
    readiness: { startToCloseTimeout: '2h', heartbeatTimeout, retry: retry(3) },
    /**
     * Smoke test and acceptance gate. Their verdicts on a server are non-retryable (a failed
     * server is stopped and relaunched by the workflow); retries only cover a lost worker.
     */
    smoke: { startToCloseTimeout: '10m', heartbeatTimeout, retry: retry(3) },
    /** Stopping: TERM, a grace period, KILL, then waiting for the GPUs to be released. */
    stop: { startToCloseTimeout: '5m', heartbeatTimeout, retry: retry(5) },
    /** Generate, extract, train, a benchmark sweep: hours or days; each resumes from what it saved, so a retry costs little. */
    longRunning: { startToCloseTimeout: '72h', heartbeatTimeout, retry: retry(20) },
  } satisfies Record<string, ActivityOptions>;
}

export type HeartbeatingActivities = ReturnType<typeof heartbeatingActivities>;

/** Every call names its options (executeWithOptions): shortActivity or one of heartbeatingActivities. */
export const activities = proxyActivities<Activities>(shortActivity);
