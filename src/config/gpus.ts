/**
 * hosts.<name>.gpus: the GPUs a run may use on a shared host. Every launch on that host gets
 * them as CUDA_VISIBLE_DEVICES, and preflight refuses only foreign processes on those GPUs;
 * a colleague's job on another GPU is reported and left alone.
 */
import type { Config } from './schema.js';

/** The target host's GPU indices, or undefined when the run may use all of them. */
export function runGpus(config: Config): number[] | undefined {
  return config.hosts[config.target.host]?.gpus;
}

/** A launch's environment with the run's GPU set; the config refuses a stage env that sets it too. */
export function withRunGpus(config: Config, env: Record<string, string>): Record<string, string> {
  const gpus = runGpus(config);
  return gpus ? { CUDA_VISIBLE_DEVICES: gpus.join(','), ...env } : env;
}
