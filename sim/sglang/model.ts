/**
 * The target and draft model configs (config.json), and what the drafter's config means
 * for acceptance — the one place incident 3 (EAGLE serving an EAGLE-3 drafter) lives.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PyError, configMissingKey, configNotFound, configUnreadable } from './tracebacks.js';

export interface ModelConfig {
  path: string;
  architectures: string[];
  modelType: string | null;
  hiddenSize: number;
  numLayers: number;
  vocabSize: number;
  numHeads: number;
  numKvHeads: number;
  intermediateSize: number;
  maxPositionEmbeddings: number;
  eosTokenId: number;
  /** The simulator's own keys under config.json "aerie_sim" (when it is an object). */
  sim: Record<string, unknown>;
}

function readJson(dir: string): Record<string, unknown> | null {
  const file = path.join(dir, 'config.json');
  let text: string;
  try {
    if (!fs.statSync(dir).isDirectory()) return null;
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not a JSON object');
    return v as Record<string, unknown>;
  } catch (e) {
    throw new PyError(configUnreadable(dir, (e as Error).message));
  }
}

const numberOr = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);

/** Read a model directory's config.json the way SGLang needs it; a Python traceback otherwise. */
export function readModelConfig(dir: string): ModelConfig {
  const raw = readJson(dir);
  if (!raw) throw new PyError(configNotFound(dir));
  const architectures = Array.isArray(raw.architectures) ? raw.architectures.map(String) : [];
  const arch = architectures[0] ?? 'LlamaForCausalLM';
  for (const key of ['hidden_size', 'num_hidden_layers', 'vocab_size']) {
    if (typeof raw[key] !== 'number') throw new PyError(configMissingKey(dir, key, arch));
  }
  const hiddenSize = raw.hidden_size as number;
  const numHeads = numberOr(raw.num_attention_heads, Math.max(1, Math.round(hiddenSize / 128)));
  const eos = Array.isArray(raw.eos_token_id) ? raw.eos_token_id[0] : raw.eos_token_id;
  return {
    path: dir,
    architectures,
    modelType: typeof raw.model_type === 'string' ? raw.model_type : null,
    hiddenSize,
    numLayers: raw.num_hidden_layers as number,
    vocabSize: raw.vocab_size as number,
    numHeads,
    numKvHeads: numberOr(raw.num_key_value_heads, numHeads),
    intermediateSize: numberOr(raw.intermediate_size, hiddenSize * 4),
    maxPositionEmbeddings: numberOr(raw.max_position_embeddings, 8192),
    eosTokenId: numberOr(eos, 2),
    sim:
      typeof raw.aerie_sim === 'object' && raw.aerie_sim !== null && !Array.isArray(raw.aerie_sim)
        ? (raw.aerie_sim as Record<string, unknown>)
        : {},
  };
}

/** Whether a config.json can be found at all (for the draft path check). */
export function hasConfig(dir: string | null): boolean {
  if (!dir) return false;
  try {
    return fs.statSync(path.join(dir, 'config.json')).isFile();
  } catch {
    return false;
  }
}

export function isEagle3Drafter(cfg: ModelConfig): boolean {
  return cfg.architectures.some((a) => /Eagle3/i.test(a));
}

/** DeepSeek-like targets get MTP defaults (3/1/4) and serve their own draft head. */
export function isDeepseekLike(cfg: ModelConfig): boolean {
  return cfg.architectures.some((a) =>
    [
      'DeepseekV3ForCausalLM',
      'DeepseekV32ForCausalLM',
      'Glm4MoeForCausalLM',
      'BailingMoeForCausalLM',
      'BailingMoeV2ForCausalLM',
    ].includes(a),
  );
}

export const DEFAULT_DRAFTER_QUALITY = 2.0;
/** n-gram lookup has no drafter to be good or bad; chat text repeats itself only a little. */
export const NGRAM_ACCEPT_LENGTH = 1.6;

export interface AcceptPlan {
  /** Mean tokens per verify (bonus token included). */
  mean: number;
  /** Most tokens one verify can yield. */
  cap: number;
  /** Why: for the README and for test messages. */
  reason: string;
}

/**
 * What one verify yields on average, given the algorithm (already NEXTN→EAGLE) and the drafter.
 * EAGLE with an EAGLE-3 drafter: SGLang captures no auxiliary hidden states, the drafter's
 * fc input has the wrong width and is skipped, nothing is accepted — and nothing errors.
 */
export function acceptPlan(
  algorithm: string,
  drafter: ModelConfig | null,
  numSteps: number,
  numDraftTokens: number,
): AcceptPlan {
  if (algorithm === 'NGRAM') {
    const cap = Math.max(1, numDraftTokens);
    return { mean: Math.min(NGRAM_ACCEPT_LENGTH, cap), cap, reason: 'n-gram lookup' };
  }
  const cap = Math.max(1, Math.min(numSteps + 1, numDraftTokens));
  if (algorithm === 'EAGLE' && drafter && isEagle3Drafter(drafter)) {
    return {
      mean: 1,
      cap,
      reason: 'EAGLE-3 drafter served with EAGLE: auxiliary hidden states not captured, drafter bypassed',
    };
  }
  const q = drafter?.sim.accept_length;
  const quality = typeof q === 'number' && Number.isFinite(q) ? q : DEFAULT_DRAFTER_QUALITY;
  return { mean: Math.min(Math.max(1, quality), cap), cap, reason: `drafter quality ${quality}` };
}

/** Rough parameter count, for the "mem usage" figures in the load log lines. */
export function weightGiB(cfg: ModelConfig, tp: number): number {
  const h = cfg.hiddenSize;
  const perLayer = 4 * h * h + 3 * h * cfg.intermediateSize;
  const params = 2 * cfg.vocabSize * h + cfg.numLayers * perLayer;
  return (params * 2) / 2 ** 30 / tp;
}

/** KV bytes per token on one TP rank (bf16 K and V for every layer). */
export function kvBytesPerToken(cfg: ModelConfig, tp: number): number {
  const headDim = cfg.hiddenSize / cfg.numHeads;
  const kvHeads = Math.max(1, cfg.numKvHeads / tp);
  return 2 * cfg.numLayers * kvHeads * headDim * 2;
}
