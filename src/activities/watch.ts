/**
 * While a stage uses a model server, watch our process: if it dies mid-stage the stage
 * fails at once with the server's log tail, instead of waiting out request timeouts.
 */
import { Context } from '@temporalio/activity';
import type { Host } from '../hosts/host.js';
import { deathReport, type ServerLaunch } from './server.js';

export async function whileServerLives<T>(
  host: Host,
  launch: ServerLaunch,
  work: (signal: AbortSignal) => Promise<T>,
  pollMs = 2000,
): Promise<T> {
  const stop = new AbortController();
  const cancel = Context.current().cancellationSignal;
  const onCancel = () => stop.abort(cancel.reason);
  cancel.addEventListener('abort', onCancel, { once: true });
  let died: Error | undefined;
  const timer = setInterval(() => {
    void host.procStatus(launch.record).then(async (s) => {
      if (s.state !== 'alive' && !died && !stop.signal.aborted) {
        died = await deathReport(host, launch, 'died while in use');
        stop.abort(died);
      }
    }, () => undefined);
  }, pollMs);
  try {
    return await work(stop.signal);
  } catch (err) {
    throw died ?? err;
  } finally {
    clearInterval(timer);
    cancel.removeEventListener('abort', onCancel);
  }
}
