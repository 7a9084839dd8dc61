/**
 * The generate stage's job and what it returns, and the four outputs it writes, by row kind.
 * regenerate.ts re-exports the types; resume.ts and combine.ts share the layout.
 */
import type { Host } from '../../hosts/host.js';
import type { FileEntry } from '../common/index.js';
import type { Status } from './plan.js';

export interface GenerateProgress {
  done: number;
  total: number;
  ok: number;
  errors: number;
  skipped: number;
  rejected: number;
  /** Samples finished per second in this run. */
  rate: number;
}

export interface GenerateJob {
  host: Host;
  baseUrl: string;
  model: string;
  inputPath: string;
  outDir: string;
  temperature: number;
  maxTokens: number;
  concurrency: number;
  /** Only the first numSamples non-blank input lines are the stage's input. */
  numSamples?: number;
  /** Extra attempts per request after the first. */
  retries: number;
  shardSize?: number;
  flushMs?: number;
  /** Bytes per read of the input through the host (default 4 MiB). */
  inputChunkBytes?: number;
  /** Per-request budget (default 10 minutes); a timeout is the sample's error. */
  requestTimeoutMs?: number;
  signal?: AbortSignal;
  onProgress?: (p: GenerateProgress) => void;
}

export interface GenerateCounts {
  input: number;
  ok: number;
  error: number;
  skipped: number;
  rejected: number;
}

export interface GenerateManifest {
  input: string;
  inputSha256: string;
  generation: { model: string; temperature: number; maxTokens: number };
  counts: GenerateCounts;
  files: FileEntry[];
  shards: { dir: string; files: number; index: string };
}

export interface GenerateSummary {
  counts: GenerateCounts;
  manifest: GenerateManifest;
  /** Rows found already done in shards at start (resume), all kinds. */
  resumed: number;
}

export const KINDS: readonly Status[] = ['ok', 'error', 'skipped', 'rejected'];
export const OUTPUT_NAMES: Record<Status, string> = {
  ok: 'train.jsonl',
  error: 'train_error.jsonl',
  skipped: 'train_skipped.jsonl',
  rejected: 'train_rejected.jsonl',
};

/** Where a pool of servers keeps its plan and its batches' shards, under shards/. */
export const poolDir = (outDir: string) => `${outDir}/shards/pool`;
export const batchDir = (outDir: string, index: number) => `${poolDir(outDir)}/b-${String(index).padStart(5, '0')}`;
const BATCH_DIR = /^b-(\d+)$/;
/** The batch index of a folder name under poolDir, or null. */
export const batchIndexOf = (name: string): number | null => {
  const m = BATCH_DIR.exec(name);
  return m ? Number(m[1]) : null;
};
