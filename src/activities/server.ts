/**
 * The model-server lifecycle: launch → await ready → smoke test → (acceptance gate) → stop,
 * one file per step (server-start, server-ready, server-gate, server-stop). Every answer is
 * checked against the process aerie launched (incidents 1, 2, 5), and every wait is watched:
 * a dead process fails the waiting activity within one poll interval (server-watch.ts).
 */
import type { ActivityDeps } from './context.js';
import { serverGateActivities } from './server-gate.js';
import { serverReadyActivities } from './server-ready.js';
import { serverStartActivities } from './server-start.js';
import { serverStopActivities } from './server-stop.js';

export { sleep } from '../stages/common/index.js';
export { deathReport } from './server-watch.js';
export type { ServerLaunch, ServerReady, ServerRole } from './server-types.js';

export function serverActivities(deps: ActivityDeps) {
  return {
    ...serverStartActivities(deps),
    ...serverReadyActivities(deps),
    ...serverGateActivities(deps),
    ...serverStopActivities(deps),
  };
}
