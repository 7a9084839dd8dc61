/**
 * Run an activity function outside a worker, the way @temporalio/testing's
 * MockActivityEnvironment does (that package is not a dependency): a Context with a
 * heartbeat recorder, made current through the activity package's AsyncLocalStorage.
 */
import { asyncLocalStorage, Context } from '@temporalio/activity';

export interface ActivityRun {
  heartbeats: unknown[];
  abort: AbortController;
}

export async function inActivity<T>(fn: () => Promise<T>, run: ActivityRun = { heartbeats: [], abort: new AbortController() }): Promise<T> {
  const noop = () => undefined;
  const log = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };
  const meter = { createCounter: () => ({ add: noop }), createHistogram: () => ({ record: noop }), createGauge: () => ({ set: noop }), withTags: () => meter };
  const info = { activityType: 'test', attempt: 1, heartbeatDetails: undefined, isLocal: false, taskQueue: 'test', activityId: '1' };
  const ContextCtor = Context as unknown as new (...args: unknown[]) => Context;
  const ctx = new ContextCtor(info, new Promise<never>(noop), run.abort.signal, (d: unknown) => run.heartbeats.push(d), undefined, log, meter, { details: undefined });
  return asyncLocalStorage.run(ctx, fn);
}
