/**
 * A fixed-size worker pool: `concurrency` workers each pull the next item as soon as their
 * previous one finishes, so the target always has `concurrency` requests in flight (no batch
 * barriers where the slowest request of a batch idles the rest).
 */

import { setMaxListeners } from 'node:events';

export interface PoolOptions {
  concurrency: number;
  /** Workers stop taking new items once this is aborted (in-flight items see it too). */
  signal?: AbortSignal;
}

/**
 * Run work over items. The first error thrown by work stops every worker from taking new
 * items; in-flight items finish (or see the abort), then that error is rethrown.
 */
export async function runPool<T>(
  items: Iterable<T>,
  work: (item: T, signal: AbortSignal) => Promise<void>,
  opts: PoolOptions,
): Promise<void> {
  const iterator = items[Symbol.iterator]();
  const stop = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
  setMaxListeners(Math.max(10, Math.floor(opts.concurrency) * 2 + 10), signal);
  let firstError: unknown = null;
  const worker = async (): Promise<void> => {
    while (!signal.aborted) {
      const next = iterator.next();
      if (next.done) return;
      try {
        await work(next.value, signal);
      } catch (err) {
        if (firstError === null) firstError = err;
        stop.abort(err);
        return;
      }
    }
  };
  const n = Math.max(1, Math.floor(opts.concurrency));
  await Promise.all(Array.from({ length: n }, () => worker()));
  if (firstError !== null) throw firstError;
}

/**
 * runPool over an async source (a file streamed from a host): workers pull the next item as
 * they free up, so the source is read only as fast as the work goes. Concurrent pulls are
 * serialised here, so any async iterator will do.
 */
export async function runPoolAsync<T>(
  items: AsyncIterable<T>,
  work: (item: T, signal: AbortSignal) => Promise<void>,
  opts: PoolOptions,
): Promise<void> {
  const iterator = items[Symbol.asyncIterator]();
  const stop = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
  // Every in-flight item listens for the abort: that many listeners is the design, not a leak.
  setMaxListeners(Math.max(10, Math.floor(opts.concurrency) * 2 + 10), signal);
  let firstError: unknown = null;
  let pulling: Promise<unknown> = Promise.resolve();
  const pull = (): Promise<IteratorResult<T>> => {
    const next = pulling.then(() => iterator.next());
    pulling = next.catch(() => undefined);
    return next;
  };
  const fail = (err: unknown): void => {
    if (firstError === null) firstError = err;
    stop.abort(err);
  };
  const worker = async (): Promise<void> => {
    while (!signal.aborted) {
      let next: IteratorResult<T>;
      try {
        next = await pull();
      } catch (err) {
        return fail(err);
      }
      if (next.done || signal.aborted) return;
      try {
        await work(next.value, signal);
      } catch (err) {
        return fail(err);
      }
    }
  };
  const n = Math.max(1, Math.floor(opts.concurrency));
  try {
    await Promise.all(Array.from({ length: n }, () => worker()));
  } finally {
    // Let the source release what it holds (an open read) when we stop early.
    await iterator.return?.().catch(() => undefined);
  }
  if (firstError !== null) throw firstError;
}

/** The error a stage throws when its signal was aborted: name 'AbortError', like fetch's. */
export class StageAbortedError extends Error {
  constructor(stage: string, detail: string) {
    super(`${stage} aborted: ${detail}`);
    this.name = 'AbortError';
  }
}

/** Sleep that ends early (rejecting) when signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
