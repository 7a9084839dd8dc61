/**
 * A model server as the activities hand it to each other and to the workflow: what was
 * launched (and how to find it again), and what readiness saw. Types only, so the lifecycle's
 * activities (server-start, -ready, -gate, -stop), its launch bookkeeping (server-launches.ts)
 * and the watcher (server-watch.ts) share them without importing one another.
 */
import type { ProcRecord } from '../hosts/host.js';
import type { RunRef } from './context.js';

export type ServerRole = 'generate' | 'extract' | 'deploy' | 'baseline';

export interface ServerLaunch {
  role: ServerRole;
  launchId: string;
  host: string;
  port: number;
  pid: number;
  pgid: number;
  logPath: string;
  argv: string[];
  modelPath: string;
  tpSize: number;
  speculative?: { algorithm: string; draftModelPath: string };
  /** An extraction launch's draft aux layer ids (what the capture or stock SGLang was told). */
  captureLayers?: number[];
  /** The serving engine (server.engine); SGLang when absent (launches recorded before vLLM). */
  engine?: 'sglang' | 'vllm';
  /** The SGLang release the launch was rendered for, and how it was found; the ready server must report it. */
  sglangVersion?: string;
  sglangVersionHow?: string;
  reattached: boolean;
  /** Things the researcher should know about this launch (e.g. a flag aerie set). */
  notes: string[];
  /** The server's startup warnings, filled in once it is ready. */
  warnings?: string[];
  /** The file next to the log that keeps notes and warnings with the run's records. */
  startupRecord?: string;
  /** How often a stage using this server checks that it is alive (the readiness poll interval). */
  watchMs: number;
  record: ProcRecord;
}

export interface ServerReady {
  elapsedMs: number;
  phase: 'ready';
  warnings: string[];
  /** What readiness noticed (e.g. /health said 200 before the server could generate). */
  notes: string[];
  startupRecord: string;
}

/** The input of every step after the launch: the run, and the launch the step acts on. */
export interface ServerStep extends RunRef {
  launch: ServerLaunch;
}
