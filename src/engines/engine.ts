/** Which engine serves a run's target (server.engine). */
import type { Config } from '../config/schema.js';

export type EngineName = 'sglang' | 'vllm';

export function engineOf(config: Pick<Config, 'server'>): EngineName {
  return config.server.engine ?? 'sglang';
}
