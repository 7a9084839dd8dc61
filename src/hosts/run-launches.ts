/**
 * Stopping what one or more runs left running on a host, by their launch records: every
 * launch whose id is `<run>.…` and whose group still has processes gets TERM, a grace period
 * and KILL (killGroup). Never by name or pattern; nothing another run launched is touched.
 */
import type { Host } from './host.js';

export async function stopRunLaunches(host: Host, runIds: readonly string[]): Promise<string[]> {
  const stopped: string[] = [];
  for (const rec of await host.listLaunches()) {
    if (!runIds.some((r) => rec.launchId.startsWith(`${r}.`))) continue;
    const state = (await host.procStatus(rec)).state;
    if (state !== 'alive' && state !== 'orphans') continue;
    await host.killGroup(rec, { graceMs: 15_000 });
    stopped.push(rec.launchId);
  }
  return stopped;
}
