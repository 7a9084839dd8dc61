/**
 * Run an activity function outside a worker, in @temporalio/testing's MockActivityEnvironment:
 * the activity's Context.current() works, its heartbeats are recorded, and aborting
 * run.abort cancels it as a workflow's cancel would.
 */
import { MockActivityEnvironment } from '@temporalio/testing';

export interface ActivityRun {
  heartbeats: unknown[];
  abort: AbortController;
}

export async function inActivity<T>(
  fn: () => Promise<T>,
  run: ActivityRun = { heartbeats: [], abort: new AbortController() },
): Promise<T> {
  const env = new MockActivityEnvironment({ activityType: 'test', taskQueue: 'test' });
  env.on('heartbeat', (d: unknown) => run.heartbeats.push(d));
  const cancel = () => env.cancel();
  if (run.abort.signal.aborted) cancel();
  else run.abort.signal.addEventListener('abort', cancel, { once: true });
  try {
    return await env.run(fn);
  } finally {
    run.abort.signal.removeEventListener('abort', cancel);
  }
}
