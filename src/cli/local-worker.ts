/**
 * The worker a command runs in its own process (`aerie run`, `resume`, `cancel`, `sweep`)
 * while it follows its workflow: it stops on Ctrl-C like the command does, and closes every
 * SSH connection it opened.
 */
import { HostPool } from '../hosts/index.js';
import { connectWorker, type TemporalTarget } from '../temporal/connect.js';
import { createWorker } from '../worker.js';

/** fn's result, with a worker for aerie's workflows and activities polling until fn settles. */
export async function withLocalWorker<T>(target: TemporalTarget, fn: () => Promise<T>): Promise<T> {
  const hosts = new HostPool();
  const connection = await connectWorker(target);
  const { worker } = await createWorker({ connection, namespace: target.namespace, hosts });
  const stop = () => worker.shutdown();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    return await worker.runUntil(fn());
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await hosts.closeAll();
    await connection.close();
  }
}
