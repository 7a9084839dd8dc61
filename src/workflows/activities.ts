/**
 * The workflow's handle on aerie's activities, and the options it calls them with: timeouts
 * and retry policies, each with its reason. Every long activity has a short heartbeatTimeout
 * (run.heartbeat-timeout) so a lost worker is noticed in seconds, not hours.
 */
import { ActivityCancellationType, proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { Config } from '../config/schema.js';
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
 * The run's activity options, for its run.heartbeat-timeout (how long a lost worker goes
 * unnoticed before the activity is retried on another) and its target host's task queue
 * (hosts.<name>.task-queue: only workers that reach the host poll it). Without a queue the
 * options are exactly those recorded histories were scheduled with, so they replay.
 *
 * With waitForCleanup (runs started since patched('cancel-waits-for-jobs')), a cancel of the
 * run waits for the activities that own processes (a launch, a stage's job) to stop them:
 * without it the run closed at once and the activity, asking Temporal about a run that was
 * gone, heard "not found" instead of "cancelled" and left its training job running.
 */
export function heartbeatingActivities(
  heartbeatTimeout: number = DEFAULT_HEARTBEAT_TIMEOUT_MS,
  taskQueue?: string,
  waitForCleanup = false,
) {
  const on = taskQueue ? { taskQueue } : {};
  const owns = waitForCleanup ? { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED } : {};
  return {
    /** shortActivity, on the host's queue: ledger, preflight, report read and write the host. */
    short: { ...shortActivity, ...on },
    /** Launching only spawns and records the process: seconds. A lost worker is retried and re-attaches. */
    launch: { startToCloseTimeout: '5m', heartbeatTimeout, retry: retry(5), ...on, ...owns },
    /**
     * Readiness: the poll budget lives in config and runs from the launch, so a retried attempt
     * continues the same launch; this bounds one attempt generously above any budget. A dead
     * server fails it as non-retryable: the workflow, not Temporal, decides about a relaunch.
     */
    readiness: { startToCloseTimeout: '2h', heartbeatTimeout, retry: retry(3), ...on },
    /**
     * Smoke test and acceptance gate. Their verdicts on a server are non-retryable (a failed
     * server is stopped and relaunched by the workflow); retries only cover a lost worker.
     */
    smoke: { startToCloseTimeout: '10m', heartbeatTimeout, retry: retry(3), ...on },
    /** Stopping: TERM, a grace period, KILL, then waiting for the GPUs to be released. */
    stop: { startToCloseTimeout: '5m', heartbeatTimeout, retry: retry(5), ...on },
    /** Generate, extract, train, a benchmark sweep: hours or days; each resumes from what it saved, so a retry costs little. */
    longRunning: { startToCloseTimeout: '72h', heartbeatTimeout, retry: retry(20), ...on, ...owns },
  } satisfies Record<string, ActivityOptions>;
}

/** The task queue of the run's target host, when it names one (hosts.<name>.task-queue). */
export function hostTaskQueue(config: Config): string | undefined {
  return config.hosts[config.target.host]?.['task-queue'];
}

export type HeartbeatingActivities = ReturnType<typeof heartbeatingActivities>;

/** Every call names its options (executeWithOptions): one of the run's heartbeatingActivities. */
export const activities = proxyActivities<Activities>(shortActivity);
