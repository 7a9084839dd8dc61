/** All activities, grouped by domain; the worker registers what createActivities returns. */
import { benchmarkActivities } from './benchmark.js';
import type { ActivityDeps } from './context.js';
import { dataActivities } from './data.js';
import { ledgerActivities } from './ledger.js';
import { preflightActivities } from './preflight.js';
import { serverActivities } from './server.js';
import { trainActivities } from './train.js';

export function createActivities(deps: ActivityDeps) {
  return {
    ...preflightActivities(deps),
    ...ledgerActivities(deps),
    ...serverActivities(deps),
    ...dataActivities(deps),
    ...trainActivities(deps),
    ...benchmarkActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
