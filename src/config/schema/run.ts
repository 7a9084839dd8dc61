/** run: the run's own settings, apart from any stage. */
import { z } from 'zod';
import { DEFAULT_HEARTBEAT_TIMEOUT_MS, HEARTBEAT_THROTTLE_MS, MIN_HEARTBEAT_TIMEOUT_MS } from '../heartbeat.js';
import { duration } from './fields.js';

export const runSchema = z
  .strictObject({
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
    'lease-ttl': duration
      .refine((ms) => ms >= 2000, {
        message:
          'must be at least 2s: the run renews its GPU lease a few times per TTL, at most once a second. Fix: set run.lease-ttl to "2s" or more (default "120s"), and keep it above run.heartbeat-timeout',
      })
      .optional()
      .describe(
        "How long the run's GPU lease on its target host lasts without a renewal (default 120s). The run's worker renews it while the run lives; when that worker is gone for good, the lease expires after this long and the next run waiting for the GPUs gets them. Keep it above run.heartbeat-timeout, so a worker that is replaced mid-run renews in time.",
      ),
  })
  .superRefine((run, ctx) => {
    // A worker replaced mid-run renews only once Temporal has counted the old one lost (the heartbeat
    // timeout): a TTL at or below it lets a live run's lease expire under it.
    const ttl = run['lease-ttl'];
    if (ttl !== undefined && ttl <= run['heartbeat-timeout'])
      ctx.addIssue({
        code: 'custom',
        path: ['lease-ttl'],
        message: `must exceed run.heartbeat-timeout (${run['heartbeat-timeout'] / 1000}s): a worker replaced mid-run renews only after the heartbeat timeout. Fix: raise run.lease-ttl or lower run.heartbeat-timeout`,
      });
  });
