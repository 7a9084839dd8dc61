/** What a finished run's stage list says when every stage ran to completion, in order. */
import type { PipelineResult } from '../../src/shared.js';

export const ALL_STAGES_DONE = [
  ['preflight', 'done'],
  ['generate', 'done'],
  ['extract', 'done'],
  ['train', 'done'],
  ['deploy', 'done'],
  ['benchmark', 'done'],
];

export function stageStates(result: PipelineResult): string[][] {
  return result.stages.map((s) => [s.stage, s.state]);
}
