/** run: the run's own settings, apart from any stage. */
import { z } from 'zod';
import { DEFAULT_HEARTBEAT_TIMEOUT_MS, HEARTBEAT_THROTTLE_MS, MIN_HEARTBEAT_TIMEOUT_MS } from '../heartbeat.js';
import { duration } from './fields.js';

export const runSchema = z.strictObject({
  label: z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]{0,40}$/, 'lowercase letters, digits and dashes')
    .default('run'),
  'on-failure': z
    .enum(['fail', 'wait'])
    .default('fail')
    .describe(
      'After a failure retrying cannot fix: end the run (resume it later with `aerie resume`), or wait for `aerie retry` / `aerie cancel`.',
    ),
  'heartbeat-timeout': duration
    .refine((ms) => ms >= MIN_HEARTBEAT_TIMEOUT_MS, {
      message:
        `must be at least ${MIN_HEARTBEAT_TIMEOUT_MS / 1000}s: workers heartbeat every ${HEARTBEAT_THROTTLE_MS / 1000} s, and a timeout close to that ` +
        `counts a briefly stalled worker as lost and runs its activity twice. Fix: set run.heartbeat-timeout to "${MIN_HEARTBEAT_TIMEOUT_MS / 1000}s" or more (default "${DEFAULT_HEARTBEAT_TIMEOUT_MS / 1000}s")`,
    })
    .default(DEFAULT_HEARTBEAT_TIMEOUT_MS)
    .describe(
      'How long a long-running activity (launch, readiness, generate, extract, train, benchmark, stop) may go without a heartbeat before Temporal counts its worker as lost and retries it on another: the time a killed worker costs. At least 5s.',
    ),
});
