/**
 * The workflow package's public face, and the worker's workflowsPath: every function exported
 * here is registered as a workflow type, so only `pipeline`, `gpuLease` (one per host,
 * gpu-lease.ts) and `drafterSweep` (`aerie sweep`'s parent, drafter-sweep.ts) are.
 */
export { pipeline, retryUpdate, statusQuery } from './pipeline.js';
export {
  drafterSweep,
  sweepStatusQuery,
  type SweepInput,
  type SweepResult,
  type SweepStatus,
} from './drafter-sweep.js';
export { gpuLease, leaseReleaseSignal, leaseRenewSignal, leaseRequestSignal, leasesQuery } from './gpu-lease.js';
export { AerieLabel, AerieStage, AerieTarget } from './search-attributes.js';
