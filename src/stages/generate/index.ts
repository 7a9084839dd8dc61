/** The generate stage: regenerate the training conversations' assistant turns with the target. */
export { runGenerate, type GenerateJob, type GenerateSummary } from './regenerate.js';
export { combinePool, planPool, type PoolPlanSummary } from './pool.js';
export { runBatch, type BatchOutcome } from './pool-batch.js';
