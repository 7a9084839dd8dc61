/** The plan's unit, and the run's paths every section of the plan renders from. */
import { runDir, type StageName } from '../../shared.js';
import type { StagePaths } from '../../stages/launch-specs.js';

export interface PlanStep {
  host: string;
  stage: StageName;
  step: string;
  argv?: string[];
  env?: Record<string, string>;
  /** Files aerie writes before the step (name → content). */
  files?: Record<string, string>;
  notes?: string[];
}

export type PlanPaths = StagePaths & { data: string };

/** The run's paths as the activities compute them (activities/context.ts runPaths), for a run id placeholder. */
export function planPaths(workdir: string, runId: string): PlanPaths {
  const root = runDir(workdir.replace(/(.)\/+$/, '$1'), runId);
  return { root, logs: `${root}/logs`, data: `${root}/data`, hidden: `${root}/hidden_states`, train: `${root}/train` };
}
