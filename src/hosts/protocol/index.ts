/** The remote process protocol, host-agnostic: launch records, the wrapper script, process identity, stopping a group. */
export { type GroupOps, type GroupSignal, killGroupWith } from './kill-group.js';
export {
  EXIT_NOT_THAT_PROCESS,
  PROC_LAUNCH_SCAN,
  PROC_STAT_SCAN,
  PROCESS_SIGNAL,
  renderDetachedLaunch,
  renderGroupSignal,
  renderLaunchScript,
  wrapperArgv,
} from './launch-script.js';
export {
  type LaunchScan,
  launchView,
  liveRecordedGroups,
  parseLaunchScan,
  remnantStatus,
  statusFrom,
} from './proc-identity.js';
export { isDead, parseProcStat, parseProcStats, type ProcStat } from './proc-stat.js';
export {
  argvHash,
  assertLaunchToken,
  isAbsolutePath,
  LAUNCH_TOKEN_ENV,
  launchIdOfRecordFile,
  launchPaths,
  type LaunchPaths,
  newLaunchToken,
  parsePidFile,
  parseProcRecord,
  procsDir,
  renderProcRecord,
} from './records.js';
export { sharedInFlight } from './single-flight.js';
