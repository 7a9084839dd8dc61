/**
 * The path the data activities had before they were split by stage (generate.ts, extract.ts,
 * extract-space.ts); kept so that importers of it still find what it exported.
 */
import type { ActivityDeps } from './context.js';
import { extractSpaceActivities } from './extract-space.js';
import { extractActivities } from './extract.js';
import { generateActivities } from './generate.js';

export type { StageOutcome } from './context.js';
export { type ExtractOutcome, modelHiddenSize } from './extract.js';
export { generateFailure, type GenerateOutcome } from './generate.js';

export function dataActivities(deps: ActivityDeps) {
  return { ...generateActivities(deps), ...extractSpaceActivities(deps), ...extractActivities(deps) };
}
