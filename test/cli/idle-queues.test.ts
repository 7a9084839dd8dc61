/**
 * A host whose task queue no worker polls: the run's activities sit scheduled, and the CLI
 * says which queue and what to start, from Temporal's own view (the pending activity's queue
 * and state, the queue's pollers) on a real dev server.
 */
import { describe, expect, it } from 'vitest';
import { idleQueueNote, unpolledQueues, waitingOnQueues } from '../../src/cli/idle-queues.js';
import { pendingActivities } from '../../src/cli/follow-run.js';
import type { PendingActivity } from '../../src/cli/phase.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { TASK_QUEUE } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { demoConfig } from '../support/demo-config.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-idleq-');

describe('activities waiting on a queue nobody polls', () => {
  it('counts only activities scheduled, not started, on a named queue for a while', () => {
    const at = 1_000_000;
    const pending: PendingActivity[] = [
      { activityType: 'acquireGpuLease', attempt: 1, scheduled: true, scheduledAtMs: at - 42_000, queue: 'gpu-site-b' },
      { activityType: 'launchServer', attempt: 1, scheduled: true, scheduledAtMs: at - 3_000, queue: 'gpu-site-b' },
      { activityType: 'trainDrafter', attempt: 1, scheduled: false, scheduledAtMs: at - 90_000, queue: 'gpu-site-c' },
      { activityType: 'preflight', attempt: 1, scheduled: true, scheduledAtMs: at - 90_000 },
    ];
    const waits = waitingOnQueues(pending, at);
    expect(waits).toEqual([{ queue: 'gpu-site-b', activity: 'acquireGpuLease', waitingMs: 42_000 }]);
    expect(idleQueueNote(waits)).toBe(
      'no worker polls task queue gpu-site-b (acquireGpuLease waiting 42 s): start `aerie worker --task-queue gpu-site-b` on a machine that reaches the host that names it',
    );
    expect(idleQueueNote([])).toBeUndefined();
  });

  it("names the site queue of a real run that waits for a site worker, and not the pipeline's own", async () => {
    const queue = `nobody-polls-${Date.now()}`;
    const config = demoConfig(`${suite.work}/host`, await freePort(), (c) => {
      c.hosts.local!['task-queue'] = queue;
    });
    const runId = `idleq-${Date.now()}`;
    await suite.t.withWorker(async () => {
      const handle = await suite.t.client.workflow.start(pipeline, {
        taskQueue: TASK_QUEUE,
        workflowId: runId,
        args: [{ runId, config, configPath: 'test' }],
      });
      try {
        const pending = await waitUntil(
          async () => {
            const p = await pendingActivities(handle);
            return p.some((a) => a.queue === queue && a.scheduled) ? p : undefined;
          },
          'the lease ask to wait on the site queue',
          60_000,
        );
        const waits = waitingOnQueues(pending, Date.now(), 0);
        expect(waits.map((w) => [w.queue, w.activity])).toEqual([[queue, 'acquireGpuLease']]);
        expect(await unpolledQueues(suite.t.client, waits)).toEqual(waits);
        // The pipeline's queue has this file's worker polling it: nothing to say about it.
        const polled = [{ queue: TASK_QUEUE, activity: 'x', waitingMs: 60_000 }];
        expect(await unpolledQueues(suite.t.client, polled)).toEqual([]);
      } finally {
        await handle.terminate('test over');
      }
    });
  }, 120_000);
});
