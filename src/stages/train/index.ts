/** The train stage's three drivers: SpecForge v0.2 scripts (v02-*), the current specforge CLI (specforge-*), and a command template (command.ts), each as argv renderers and job hooks. */
export { commandDrafterDir, type CommandTemplate, type CommandValues, renderCommandArgv } from './command.js';
export { type TrainLaunch, TrainLaunchError } from './launch.js';
export { parseGenericProgress, type TrainProgress } from './progress.js';
export { commandHooks, type TrainResult, v02Hooks } from './run.js';
export { listSpecforgeCheckpoints } from './specforge-checkpoints.js';
export {
  renderSpecforgeConfig,
  renderSpecforgeExportArgv,
  renderSpecforgeTrainArgv,
  type SpecforgeRun,
} from './specforge-config.js';
export { specforgeHooks } from './specforge-run.js';
export { renderTrainArgv } from './v02-argv.js';
