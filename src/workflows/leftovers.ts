/**
 * A cancelled run's last look at its target host: any launch of this run still running (a
 * training job whose activity's worker was gone when the cancel came, so it never heard it)
 * is stopped by its record before the run gives its GPUs back. Not cancellable: it is the
 * cancel's own cleanup. Best effort: what it could not stop, the board says.
 */
import { CancellationScope } from '@temporalio/workflow';
import { activities } from './activities.js';
import type { Run } from './context.js';
import { failureMessage } from './failure.js';

export async function stopLeftovers({ base, options, progress, runId }: Run): Promise<void> {
  await CancellationScope.nonCancellable(async () => {
    try {
      const { stopped } = await activities.stopRunLeftovers.executeWithOptions(
        // Bounded even with no worker on the host's queue: a cancel must end.
        {
          ...options.stop,
          scheduleToCloseTimeout: '10m',
          summary: `stop whatever run ${runId} still has running, by its launch records`,
        },
        [base],
      );
      if (stopped.length) progress.say(`stopped what the run had left running: ${stopped.join(', ')}`);
    } catch (err) {
      progress.say(`could not check for what the run left running: ${failureMessage(err).slice(0, 200)}`);
    }
  });
}
