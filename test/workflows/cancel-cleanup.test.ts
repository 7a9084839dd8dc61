/**
 * A cancel stops what the run launched before the run closes. The activities that own
 * processes (a stage's job, a launch) are cancelled with WAIT_CANCELLATION_COMPLETED: the run
 * stays open while the training activity stops its trainer, so the activity hears "cancel
 * requested" (and stops the job) instead of "not found" (and leaves it running, as
 * `aerie cancel <sweep>` once did). Real workflow code on a real dev server, stub activities.
 */
import { CancelledFailure, Context } from '@temporalio/activity';
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { demoConfig } from '../support/demo-config.js';
import { StubActivities } from '../support/stub-activities.js';
import { waitUntil } from '../support/temporal.js';
import { useWorkflowEnv } from '../support/workflow-env.js';

const w = useWorkflowEnv();

/** Heartbeats until cancelled; then what the activity heard, and `stop` for what it does about it. */
function trainer(stop: () => Promise<void>) {
  const seen: { started: boolean; cancelRequested?: boolean; notFound?: boolean; stoppedAt?: number } = {
    started: false,
  };
  const run = async () => {
    const ctx = Context.current();
    const beat = setInterval(() => ctx.heartbeat({ step: 1 }), 50);
    seen.started = true;
    try {
      await ctx.cancelled;
    } catch {
      // The cancel arrived (on a heartbeat's answer).
    } finally {
      clearInterval(beat);
    }
    seen.cancelRequested = ctx.cancellationDetails?.cancelRequested;
    seen.notFound = ctx.cancellationDetails?.notFound;
    await stop();
    seen.stoppedAt = Date.now();
    throw new CancelledFailure('trainer stopped');
  };
  return { seen, run };
}

async function closedHow(result: Promise<unknown>): Promise<{ name?: string; at: number }> {
  const err = await result.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  return { name: (err as WorkflowFailedError).cause?.name, at: Date.now() };
}

describe('a cancel during train', { timeout: 60_000 }, () => {
  it('waits for the training activity to stop its job, and the activity hears a cancel, not "not found"', async () => {
    // Stopping takes a while, as TERM, the grace period and the GPUs' release do on a host.
    const t = trainer(() => new Promise((r) => setTimeout(r, 1500)));
    const stubs = new StubActivities().on('trainDrafter', t.run);
    const closed = await w.runPipeline(
      stubs,
      { runId: 'cancel-train', config: demoConfig('/stub/work', 30000), record: 'cancel-waits-train' },
      async (h) => {
        await waitUntil(() => Promise.resolve(t.seen.started || undefined), 'training to start', 30_000);
        await h.cancel();
        const how = await closedHow(h.result());
        const events = (await h.fetchHistory()).events ?? [];
        const cancelled = events.findIndex((e) => e.activityTaskCanceledEventAttributes);
        const closedAt = events.findIndex((e) => e.workflowExecutionCanceledEventAttributes);
        return { ...how, cancelled, closedAt };
      },
    );
    expect(closed.name).toBe('CancelledFailure');
    expect(t.seen).toMatchObject({ cancelRequested: true, notFound: false });
    // The job was stopped before the run said it was cancelled.
    expect(t.seen.stoppedAt).toBeDefined();
    expect(t.seen.stoppedAt!).toBeLessThanOrEqual(closed.at);
    expect(closed.cancelled).toBeGreaterThan(0);
    expect(closed.closedAt).toBeGreaterThan(closed.cancelled);
    expect(stubs.liveServers()).toEqual([]);
  });

  it("ends cancelled, not failed, when the activity's worker goes silent before it has stopped the job", async () => {
    let release!: () => void;
    const silent = new Promise<void>((r) => (release = r));
    // After the cancel it neither heartbeats nor answers: to Temporal, a worker gone mid-cleanup.
    const t = trainer(() => silent);
    const stubs = new StubActivities().on('trainDrafter', t.run);
    const config = demoConfig('/stub/work', 30000, (c) => (c.run['heartbeat-timeout'] = 5000));
    const closed = await w.runPipeline(stubs, { runId: 'cancel-silent', config }, async (h) => {
      await waitUntil(() => Promise.resolve(t.seen.started || undefined), 'training to start', 30_000);
      await h.cancel();
      const how = await closedHow(h.result());
      const stopped = t.seen.stoppedAt;
      release(); // lets the worker shut down after the test
      return { ...how, stopped, status: (await h.describe()).status.name };
    });
    expect(closed.status).toBe('CANCELLED');
    expect(closed.name).toBe('CancelledFailure');
    expect(closed.stopped).toBeUndefined();
    // What the silent activity never stopped is looked for by the run's launch records.
    expect(stubs.trace().at(-1)).toBe('stopRunLeftovers');
    // Tried once: a cancelled activity is not retried after its heartbeat timeout.
    expect(stubs.calls.filter((c) => c.name === 'trainDrafter').length).toBe(1);
  });
});
