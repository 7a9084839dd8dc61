/**
 * The run's GPU lease on its target host, from the workflow's side: acquired before anything
 * is launched there (preflight included, whose port and GPU checks mean something only once
 * the GPUs are the run's), renewed by an activity for as long as the run holds it, released
 * when the run ends, fails, is cancelled, or waits for an operator. Behind patched('gpu-leases'):
 * runs recorded before leases existed replay without them.
 */
import {
  ActivityCancellationType,
  CancellationScope,
  isCancellation,
  patched,
  proxyActivities,
} from '@temporalio/workflow';
import type { LeaseActivities, LeaseGrant } from '../activities/leases.js';
import { shortActivity } from './activities.js';
import type { StageName } from '../shared.js';
import type { Run } from './context.js';
import { failureMessage } from './failure.js';

const leases = proxyActivities<LeaseActivities>(shortActivity);

export interface HeldLease {
  grant: LeaseGrant;
  /** Stops the renewals and gives the GPUs back; once, whatever calls it first. */
  release(): Promise<void>;
}

/**
 * Waits for the run's GPUs on its target host and keeps them; undefined on a history from before
 * leases. A generate pool asks the same for each other host it uses, shown under its own stage.
 */
export async function leaseGpus(
  run: Pick<Run, 'base' | 'config' | 'options' | 'pipelineOptions' | 'progress'>,
  stage: StageName = 'preflight',
): Promise<HeldLease | undefined> {
  if (!patched('gpu-leases')) return undefined;
  // Asking reads the host's GPU inventory and stops what expired holders left there: on the
  // host's queue. Renewing and releasing only talk to Temporal: on the pipeline's.
  const { base, config, options, pipelineOptions, progress } = run;
  const host = config.target.host;
  const queue = options.longRunning.taskQueue;
  progress.enter(stage, `waiting for a lease on ${host}'s GPUs${queue ? ` (asked by a worker on ${queue})` : ''}`);
  const grant = await leases.acquireGpuLease.executeWithOptions(
    {
      // Waiting may take as long as another run's training: each attempt keeps its place in the queue.
      ...options.longRunning,
      summary: `GPU lease: wait for ${host}'s GPUs (held by other runs until they finish)`,
    },
    [base],
  );
  progress.say(grant.note);
  const renewals = new CancellationScope();
  const holding = renewals
    .run(() =>
      leases.holdGpuLease.executeWithOptions(
        {
          ...pipelineOptions.longRunning,
          // Released only once the renewals have stopped: a renewal still in flight after the
          // release would ask for the GPUs again.
          cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
          summary: `GPU lease: ${grant.note}; renewed until the run ends`,
        },
        [{ ...base, host, gpus: grant.gpus, ttlMs: grant.ttlMs }],
      ),
    )
    .catch((err: unknown) => {
      // Renewals that give up let the lease expire after its TTL; the run's own work goes on.
      if (!isCancellation(err)) progress.say(`GPU lease renewals stopped: ${failureMessage(err).slice(0, 200)}`);
    });
  let released = false;
  return {
    grant,
    async release() {
      if (released) return;
      released = true;
      renewals.cancel();
      await holding;
      await CancellationScope.nonCancellable(() =>
        leases.releaseGpuLease.executeWithOptions({ ...shortActivity, summary: `GPU lease: release ${host}'s GPUs` }, [
          { host },
        ]),
      );
    },
  };
}
