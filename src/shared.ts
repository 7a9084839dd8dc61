/**
 * Names and types shared by the workflow, activities, worker and CLI. Kept free of
 * Node built-ins so the workflow sandbox can import it.
 */
import type { RunSummary } from './bench/summary.js';
import type { Config } from './config/schema.js';

export const TASK_QUEUE = 'aerie-pipeline';

export const STAGES = ['preflight', 'generate', 'extract', 'train', 'deploy', 'benchmark'] as const;
export type StageName = (typeof STAGES)[number];

/**
 * Search attributes aerie registers on the dev server and sets on every run: the one list of
 * their names; src/workflows/search-attributes.ts makes the typed keys from it.
 */
export const SEARCH_ATTRIBUTES = {
  AerieStage: 'Keyword',
  AerieTarget: 'Keyword',
  AerieLabel: 'Keyword',
} as const;

export type StageState = 'pending' | 'running' | 'skipped' | 'done' | 'failed' | 'waiting';

export interface StageStatus {
  stage: StageName;
  state: StageState;
  /** One line for humans: what the stage is doing or what it produced. */
  note?: string;
  startedAt?: string;
  finishedAt?: string;
}

export interface RunStatus {
  runId: string;
  label: string;
  stages: StageStatus[];
  current?: StageName;
  error?: string;
}

export interface RetryRequest {
  /** Re-run from this stage even where the ledger says it is done; default: the failed stage. */
  stage?: StageName;
}

/** What a run is started with: the validated config plus where the run lives on its host. */
export interface PipelineInput {
  runId: string;
  config: Config;
  /** Absolute path of the config file on the machine that started the run (for the record only). */
  configPath: string;
  /**
   * A sweep's shared run (drafter-sweep.ts): return after this stage, with the recorded results
   * of the stages so far in `PipelineResult.shared`. Unset: the whole lifecycle.
   */
  until?: ShareableStage;
  /** A sweep's variant: these stages were computed by another run and are not run again. */
  shared?: SharedStages;
}

/** The stages a sweep can compute once for all its variants, in pipeline order. */
export const SHAREABLE_STAGES = ['generate', 'extract', 'train'] as const;
export type ShareableStage = (typeof SHAREABLE_STAGES)[number];

/** One stage's recorded result as later stages read it, with the inputs hash they chain on. */
export type SharedStageResult = Record<string, unknown> & { inputsHash: string };

export interface SharedStages {
  /** The run that computed them (their files live in its run folder on the host). */
  fromRun: string;
  stages: Partial<Record<ShareableStage, SharedStageResult>>;
}

export interface PipelineResult {
  runId: string;
  stages: StageStatus[];
  /** With `until`: the results of the stages it ran (or skipped on a valid record), for the variants. */
  shared?: SharedStages;
  report?: {
    markdown: string;
    table: string;
    paths: string[];
    /** The verdict, per-level figures and GPU-hours (results from before rounds have none). */
    summary?: RunSummary;
    /** What the deploy stage's acceptance gate measured; a later run may be held to it (stages.deploy.acceptance-versus). */
    gate?: GateRecord;
  };
}

/** The acceptance gate's figure, kept in the benchmark's ledger record (with the report) for later runs. */
export interface GateRecord {
  acceptLength: number;
  perRequest: number[];
  /** held-out: generate input rows after num-samples, never trained on; fixed: four built-in prompts. */
  prompts: { kind: 'held-out' | 'fixed'; source: string };
  /** The bar it was held to: the threshold, or another run's gate less the margin when that was higher. */
  floor: number;
  floorFrom: string;
}

/** Where a run keeps its files on a host: derived, never stored, so every layer agrees. */
export function runDir(hostWorkdir: string, runId: string): string {
  return `${hostWorkdir}/runs/${runId}`;
}

/** launchId for a long process: run + stage + a key that does not change across activity retries. */
export function launchIdFor(runId: string, role: string, generation = 0): string {
  return `${runId}.${role}.${generation}`;
}
