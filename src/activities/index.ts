/**
 * The pipeline's activities, one module per stage or concern, in lifecycle order. The worker
 * registers what createActivities returns, beside the GPU-lease activities (leases.ts, typed
 * apart for the lease workflow); the keys are the activity names recorded in every run's
 * history (test/activities/registered-names.test.ts keeps them). The workflow sees them only as
 * types (Activities). Outside this folder, code also imports the server's types (server.ts),
 * and `aerie doctor` runs the preflight checks without Temporal (preflight.ts: runPreflight).
 */
import { benchmarkActivities } from './benchmark.js';
import { cleanupActivities } from './cleanup.js';
import type { ActivityDeps } from './context.js';
import { extractSpaceActivities } from './extract-space.js';
import { extractActivities } from './extract.js';
import { extractHfActivities } from './extract-hf.js';
import { extractPoolActivities } from './extract-pool.js';
import { generateActivities } from './generate.js';
import { generatePoolActivities } from './generate-pool.js';
import { ledgerActivities } from './ledger.js';
import { preflightActivities } from './preflight.js';
import { serverActivities } from './server.js';
import { trainActivities } from './train.js';

export function createActivities(deps: ActivityDeps) {
  return {
    ...preflightActivities(deps),
    ...ledgerActivities(deps),
    ...serverActivities(deps),
    ...generateActivities(deps),
    ...generatePoolActivities(deps),
    ...extractSpaceActivities(deps),
    ...extractActivities(deps),
    ...extractHfActivities(deps),
    ...extractPoolActivities(deps),
    ...trainActivities(deps),
    ...benchmarkActivities(deps),
    ...cleanupActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
