/** The extract stage: hidden states from the target, by aerie's capture in an SGLang server (patched-server, stock-server: server-driver.ts), by aerie's capture on a transformers forward on the host (transformers: hf-driver.ts) or by SpecForge's prepare_hidden_states.py (specforge-offline: offline-driver.ts). */
export { featureBytesPerToken } from './chat-tokens.js';
export {
  captureLaunchFixes,
  CaptureSetupError,
  draftLayerIds,
  extractDumpDir,
  moduleLaunch,
  resolveCapture,
  type ResolvedCapture,
  resolveSglangVersion,
  runDumpDir,
  targetLayers,
} from './capture-launch.js';
export {
  offlineHooks,
  type OfflineResult,
  type PrepareLaunch,
  renderPrepareArgv,
  vocabMappingPath,
} from './offline-driver.js';
export {
  classifyHfFailure,
  type HfExtractLaunch,
  hfExtractHooks,
  type HfProgress,
  type HfResult,
  hfSummaryPath,
  parseHfProgress,
  renderHfExtractArgv,
} from './hf-driver.js';
export { estimateOfflineTokens, offlineBytesNeeded, type TokenizerOnHost } from './offline-estimate.js';
export { estimatedBytesPerToken } from './plan.js';
export { describeVerdict, runSelfCheck, SelfCheckFailedError } from './selfcheck.js';
export { EarlySamplesFailedError, runExtract } from './server-driver.js';
export { type ExtractProgress } from './server-job.js';
export { runStockAux } from './stock-server.js';
export { tokenizeSamples, TokensDisagreeError } from './tokens.js';
export {
  combineExtractPool,
  extractBatchDir,
  extractBatchSamples,
  planExtractPool,
  type ExtractPoolPlan,
  type ExtractPoolSummary,
} from './pool.js';
