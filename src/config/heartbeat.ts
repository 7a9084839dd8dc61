/**
 * Heartbeat timing: the config owns run.heartbeat-timeout (its default and its floor), and
 * the worker and workflow read the same numbers. Free of Node built-ins so the workflow
 * sandbox can import it.
 */

/** Workers send a heartbeat at most this often (maxHeartbeatThrottleInterval), and aerie's activities beat every second. */
export const HEARTBEAT_THROTTLE_MS = 1000;
/** run.heartbeat-timeout's default: how long a lost worker goes unnoticed. */
export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 30_000;
/**
 * The shortest run.heartbeat-timeout allowed: five beats. Closer to the beat interval, a
 * worker stalled for a few seconds (GC, a busy machine, a slow SSH round trip) would be
 * declared lost while it still works, and its activity run twice.
 */
export const MIN_HEARTBEAT_TIMEOUT_MS = 5 * HEARTBEAT_THROTTLE_MS;
