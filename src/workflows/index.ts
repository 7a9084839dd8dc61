/**
 * The workflow package's public face, and the worker's workflowsPath: every function exported
 * here is registered as a workflow type, so only `pipeline` is.
 */
export { pipeline, retryUpdate, statusQuery } from './pipeline.js';
export { AerieLabel, AerieStage, AerieTarget } from './search-attributes.js';
