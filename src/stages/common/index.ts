/** Pieces every data and training stage shares: jsonl output through a Host, streamed reads, the worker pool and HTTP to a model server, detached-job supervision, disk-space errors, training conversations, aerie's own Python on the host, and which SpecForge a host runs. */
export { type AeriePy, AeriePyError, runAeriePy, shipAeriePy } from './aerie-py.js';
export {
  estimateTokens,
  hasUserTurn,
  parseSampleLine,
  renderForExtraction,
  type Sample,
  type Turn,
  unsafeIdReason,
} from './conversations.js';
export { DiskFullError, formatBytes, InsufficientSpaceError, writeFailure } from './disk-full.js';
export { classifyTrainFailure, type TrainFailure } from './train-failure.js';
export { digestLines, HostLineReader, streamLines, type LinePosition } from './host-lines.js';
export { HttpStatusError, postJson, ServerUnreachableError, withRetries } from './http.js';
export { latestGeneration } from './job-follow.js';
export {
  type Ended,
  JobFailure,
  type JobHooks,
  type NextStep,
  superviseJob,
  type SuperviseOptions,
} from './job-supervise.js';
export { JsonlAppender, tempOutputPath } from './jsonl-append.js';
export {
  type FileEntry,
  listShardFiles,
  type NumberedLine,
  readShardIndex,
  sha256Hex,
  type ShardIndexEntry,
  ShardWriter,
  splitJsonlLines,
  toJsonl,
  writeJsonlFile,
} from './jsonl-shards.js';
export { runPoolAsync, sleep, StageAbortedError } from './pool.js';
export {
  CLI_PROBE,
  detectFromCli,
  detectFromScript,
  type Detection,
  parseCliProbe,
  parseRevParse,
  prepareAuxFlagIn,
  resolveRevision,
} from './specforge-detect.js';
export {
  profileBehaviours,
  profilesFor,
  SPECFORGE_PROFILES,
  type SpecforgeDriver,
  type SpecforgeProfile,
  type SpecforgeProfileId,
  type SpecforgeRevisionPin,
} from './specforge-revision.js';
