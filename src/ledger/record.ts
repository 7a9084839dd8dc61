/**
 * The stage ledger: a finished stage leaves a record on its host, and a resumed run skips
 * the stage only when the record still describes what the config asks for and its
 * outputs are still there, whole. Pure functions; the activity does the I/O.
 */
import { createHash } from 'node:crypto';
import type { Config } from '../config/schema.js';
import type { StageName } from '../shared.js';

export interface LedgerOutput {
  path: string;
  bytes: number;
  /** Files: sha256 of the contents. Directories: number of files under it. */
  sha256?: string;
  count?: number;
}

export interface LedgerRecord {
  stage: StageName;
  inputsHash: string;
  outputs: LedgerOutput[];
  /** What later stages need from this one (paths, counts): small JSON. */
  result: unknown;
  note: string;
  finishedAt: string;
  runId: string;
}

/** Canonical JSON: object keys sorted, so the hash does not depend on key order in YAML. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * The part of the config that decides a stage's output. Knobs that change only how the work
 * is carried out (concurrency, retries, launcher paths, env) are left out: changing them
 * must not throw away a day of finished work.
 */
export function stageInputs(config: Config, stage: StageName): unknown {
  const model = config.target['model-path'];
  const s = config.stages;
  switch (stage) {
    case 'preflight':
      return {};
    case 'generate':
      return {
        model,
        generate: omit(s.generate, ['concurrency', 'request-retries', 'shard-size', 'servers', 'batch-size']),
      };
    case 'extract':
      return {
        model,
        extract: omit(s.extract, [
          'concurrency',
          'dump-dir',
          'launcher',
          'env',
          'python',
          'crash-retries',
          'self-check',
          'cross-check',
        ]),
        // The transformers driver captures the states the serving engine feeds (engines/aux-layers.ts).
        // Only named for vLLM, so SGLang runs recorded before the engine existed keep their hashes.
        ...(s.extract.driver === 'transformers' && config.server.engine === 'vllm' ? { servedBy: 'vllm' } : {}),
      };
    case 'train':
      return { model, train: omit(s.train, ['env', 'launcher', 'crash-retries']) };
    case 'deploy':
    case 'benchmark':
      return {
        model,
        deploy: s.deploy,
        benchmark: s.benchmark,
        server: {
          'tp-size': config.server['tp-size'],
          'extra-args': config.server['extra-args'],
          ...(config.server.engine === 'vllm' ? { engine: 'vllm' } : {}),
        },
      };
  }
}

function omit(obj: object, keys: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(obj).filter(([k]) => !keys.includes(k)));
}

export function inputsHash(config: Config, stage: StageName, upstream: readonly string[]): string {
  const h = createHash('sha256');
  h.update(canonicalJson({ stage, inputs: stageInputs(config, stage), upstream }));
  return h.digest('hex').slice(0, 32);
}

export type LedgerVerdict = { valid: true } | { valid: false; reason: string };

/**
 * Is a stored record still a hit? `current` is what the host reports now for each recorded
 * output path (null when missing). A deleted or truncated output means re-run, never a stale hit.
 */
export function judgeLedger(
  record: LedgerRecord | null,
  expectedHash: string,
  current: ReadonlyMap<string, { bytes: number; count?: number } | null>,
): LedgerVerdict {
  if (!record) return { valid: false, reason: 'not done yet' };
  if (record.inputsHash !== expectedHash)
    return { valid: false, reason: 'config or upstream changed since it was done' };
  for (const out of record.outputs) {
    const now = current.get(out.path);
    if (!now) return { valid: false, reason: `output ${out.path} is missing` };
    if (now.bytes !== out.bytes)
      return { valid: false, reason: `output ${out.path} is ${now.bytes} bytes, recorded ${out.bytes}` };
    if (out.count !== undefined && now.count !== out.count) {
      return { valid: false, reason: `output ${out.path} holds ${now.count} files, recorded ${out.count}` };
    }
  }
  return { valid: true };
}

export function parseLedgerRecord(text: string): LedgerRecord | null {
  try {
    const r = JSON.parse(text) as LedgerRecord;
    if (typeof r.inputsHash !== 'string' || !Array.isArray(r.outputs)) return null;
    return r;
  } catch {
    return null;
  }
}
