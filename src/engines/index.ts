/**
 * The serving engines aerie drives, one folder each: SGLang (src/sglang/, the first engine,
 * whose launch lines, releases and log rules live there) and vLLM (vllm/). What differs
 * between engines — the launch line, readiness and the log, the smoke request, where accept
 * counts come from, the drafter's load rules — is asked of the engine; the lifecycle around
 * it (launch records, the watcher, the gate's verdict, the ledger) is the same for both.
 */
export type { EngineName } from './engine.js';
export { engineOf } from './engine.js';
export { VllmClient, type Completion } from './vllm/client.js';
export {
  defaultAuxLayers,
  draftAuxLayers,
  servedAuxLayers,
  vllmDrafterProblems,
  vllmLoaderProblems,
  type VllmDrafterInputs,
} from './vllm/drafter.js';
export {
  renderVllmArgv,
  speculativeConfig,
  validateVllmSpec,
  VLLM_DEFAULT_LAUNCHER,
  vllmBenchmarkArgs,
  vllmLaunchEnv,
} from './vllm/launch.js';
export { classifyVllmFailure, readVllmPhase, stripVllmPrefix, vllmWarnings } from './vllm/log.js';
export { counterDelta, positionRates, specCounters, windowAcceptLength, type SpecCounters } from './vllm/metrics.js';
export { safetensorsNamesScript, parseSafetensorsHeader } from './vllm/safetensors.js';
export { servedHiddenStateIndices } from './aux-layers.js';
