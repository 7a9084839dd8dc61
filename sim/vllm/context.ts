/**
 * What the parts of one `aerie-sim vllm` process share (server.ts builds it; startup.ts, routes.ts,
 * generate.ts and death.ts read it): the parsed flags, the resolved target and speculative plan, the
 * engine, the counters /metrics reads, and the process's state as it moves from start-up to its end.
 */
import type http from 'node:http';
import type { Engine } from '../sglang/engine.js';
import type { FaultGate } from '../sglang/faults.js';
import type { SimLM } from '../sglang/lm.js';
import type { ModelConfig } from '../sglang/model.js';
import type { SimEnv } from '../sglang/settings.js';
import type { VllmArgs } from './args.js';
import type { VllmLog } from './log.js';
import type { MetricsState } from './metrics.js';
import type { SpecPlan } from './spec.js';

export const VLLM_VERSION = '0.32.0';

export interface VllmServer {
  a: VllmArgs;
  env: SimEnv;
  faults: FaultGate;
  log: VllmLog;
  host: string | undefined;
  target: ModelConfig;
  maxModelLen: number;
  plan: SpecPlan | null;
  k: number;
  tp: number;
  weights: number;
  kvTokens: number;
  servedNames: string[];
  metrics: MetricsState;
  startTimeS: number;
  fingerprint: string;
  keepAlive: boolean;
  lm: SimLM;
  engine: Engine;
  wait: (sec: number) => Promise<unknown>;
  /** Resolves runVllm with the exit code, once. */
  end: (code: number) => void;
  ended: boolean;
  status: 'starting' | 'up' | 'dead' | 'shutting-down';
  deadResolve: () => void;
  deadPromise: Promise<void>;
  server: http.Server | null;
  lastPrompt: number;
  shutdown: (why: 'signal' | 'engine-dead') => void;
}
