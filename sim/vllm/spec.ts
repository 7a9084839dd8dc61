/**
 * --speculative-config, as vLLM 0.32.0 takes it: the SpeculativeConfig fields and methods
 * (vllm==0.32.0:vllm/config/speculative.py:70-83, field :399; extra keys forbidden,
 * config/utils.py:71), the drafter's architecture as the method renames it
 * (transformers_utils/configs/eagle.py:46-64), and the two ways a well-formed config still fails
 * with an EAGLE-3 drafter (vllm==0.32.0:vllm/model_executor/models/llama_eagle3.py):
 *  - draft_vocab_size equal to the target's vocab with a `d2t` tensor: no draft_id_to_target_id
 *    parameter exists, and the loader raises (llama_eagle3.py:338-345,428-430; models/utils.py:443-448);
 *  - auxiliary layers that do not give the drafter its three states: the target's default
 *    (2, L // 2, L - 3) (model_executor/models/interfaces.py:1712-1733) or the draft config's
 *    eagle_aux_hidden_state_layer_ids (v1/worker/gpu_model_runner.py:5251-5285), kept as a sorted
 *    set (interfaces.py:1577-1578), against the drafter's count (llama_eagle3.py:208-221): the
 *    server says ready, and the first decode dies on the fc layer's shapes (aux-collapse.log).
 */
import fs from 'node:fs';
import path from 'node:path';
import { type ModelConfig, readModelConfig } from '../sglang/model.js';

/** SpeculativeConfig's `method` values (vllm==0.32.0:vllm/config/speculative.py:70-83). */
export const METHODS = [
  'ngram',
  'medusa',
  'mlp_speculator',
  'draft_model',
  'suffix',
  'custom_class',
  'eagle',
  'eagle3',
  'extract_hidden_states',
  'deepseek_mtp',
  'mtp',
  'glm5_next_mtp',
  'dflash',
  'ngram_gpu',
  'dspark',
] as const;

/** The SpeculativeConfig fields the simulator accepts (a subset of the real dataclass's; others are refused as extra). */
const FIELDS = new Set([
  'method',
  'model',
  'num_speculative_tokens',
  'draft_tensor_parallel_size',
  'max_model_len',
  'quantization',
  'revision',
  'code_revision',
  'disable_padded_drafter_batch',
  'prompt_lookup_max',
  'prompt_lookup_min',
  'parallel_drafting',
  'use_local_argmax_reduction',
]);

/** Architectures the drafter registry knows for EAGLE (the EAGLE entries of vllm==0.32.0:vllm/model_executor/models/registry.py:620-680). */
const EAGLE_ARCHS = new Set([
  'EagleCohereForCausalLM',
  'EagleLlamaForCausalLM',
  'EagleLlama4ForCausalLM',
  'EagleMiniCPMForCausalLM',
  'Eagle3LlamaForCausalLM',
  'Eagle3MiniMaxM2ForCausalLM',
  'LlamaForCausalLMEagle3',
  'Eagle3Qwen2_5vlForCausalLM',
  'Eagle3Qwen3vlForCausalLM',
  'Eagle3Qwen3ForCausalLM',
  'EagleMistralForCausalLM',
  'EagleMistralLarge3ForCausalLM',
  'Eagle3DeepseekV2ForCausalLM',
  'Eagle3DeepseekV3ForCausalLM',
  'EagleDeepSeekMTPModel',
]);

export interface SpecPlan {
  method: string;
  draftPath: string;
  numTokens: number;
  drafter: ModelConfig;
  /** The raw draft config.json. */
  raw: Record<string, unknown>;
  /** The drafter's architecture after the method's renaming. */
  arch: string;
  tensorNames: string[];
  /** A loader error raised while the drafter's weights load (engine core fails to start), or null. */
  loadError: string | null;
  /** Why the first decode will kill the engine (the fc layer's shapes), or null. */
  doomed: { collected: number; expected: number } | null;
}

/** A refusal while the API server builds its config: a pydantic ValidationError for SpeculativeConfig. */
export class SpecValidationError extends Error {
  constructor(
    message: string,
    /** The drafter's config when it was read before the refusal (its "Resolved architecture" line precedes the traceback). */
    readonly drafter: ModelConfig | null = null,
  ) {
    super(message);
  }
}

function readRaw(dir: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Tensor names in the drafter's safetensors files (their headers only). */
export function safetensorsNames(dir: string): string[] {
  let files: string[];
  try {
    files = fs.readdirSync(dir).filter((f) => f.endsWith('.safetensors'));
  } catch {
    return [];
  }
  const names: string[] = [];
  for (const f of files) {
    const fd = fs.openSync(path.join(dir, f), 'r');
    try {
      const head = Buffer.alloc(8);
      if (fs.readSync(fd, head, 0, 8, 0) < 8) continue;
      const n = Number(head.readBigUInt64LE(0));
      if (n <= 0 || n > 100 * 2 ** 20) continue;
      const buf = Buffer.alloc(n);
      fs.readSync(fd, buf, 0, n, 8);
      names.push(...Object.keys(JSON.parse(buf.toString('utf8')) as object).filter((k) => k !== '__metadata__'));
    } catch {
      // not a safetensors header: the real loader would fail later; the simulator reads no tensors
    } finally {
      fs.closeSync(fd);
    }
  }
  return names;
}

const int = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) ? v : undefined);

function auxIds(raw: Record<string, unknown>): number[] | undefined {
  const top = raw.eagle_aux_hidden_state_layer_ids;
  const sub = (raw.eagle_config as Record<string, unknown> | undefined)?.eagle_aux_hidden_state_layer_ids;
  const ids = Array.isArray(top) ? top : Array.isArray(sub) ? sub : undefined;
  return ids?.every((x) => int(x) !== undefined) ? (ids as number[]) : undefined;
}

/** The drafter's expected aux count: num_aux_hidden_states, else len(eagle_config ids) (sub-dict only), else 3. */
function expectedAux(raw: Record<string, unknown>): number {
  const n = int(raw.num_aux_hidden_states);
  if (n !== undefined) return n;
  const sub = (raw.eagle_config as Record<string, unknown> | undefined)?.eagle_aux_hidden_state_layer_ids;
  return Array.isArray(sub) ? sub.length : 3;
}

/** Resolve a parsed --speculative-config against the target; throws SpecValidationError where vLLM's config refuses it. */
export function resolveSpec(sc: Record<string, unknown>, target: ModelConfig): SpecPlan {
  const extra = Object.keys(sc).filter((k) => !FIELDS.has(k));
  if (extra.length > 0)
    throw new SpecValidationError(
      `${extra[0]}\n  Unexpected keyword argument [type=unexpected_keyword_argument, input_value=${JSON.stringify(sc[extra[0]!])}, input_type=${typeof sc[extra[0]!]}]`,
    );
  const model = typeof sc.model === 'string' ? sc.model : null;
  let method = typeof sc.method === 'string' ? sc.method : null;
  // Guessed from the draft path when absent (config/speculative.py:1326-1340).
  if (method === null)
    method = model?.toLowerCase().includes('eagle3')
      ? 'eagle3'
      : model?.toLowerCase().includes('eagle-')
        ? 'eagle'
        : 'draft_model';
  if (!(METHODS as readonly string[]).includes(method))
    throw new SpecValidationError(
      `method\n  Input should be ${METHODS.map((m) => `'${m}'`).join(', ')} [type=literal_error, input_value='${method}', input_type=str]`,
    );
  if (method !== 'eagle' && method !== 'eagle3')
    throw new SpecValidationError(`  Value error, the simulator serves only method eagle or eagle3, not ${method}`);
  if (!model) throw new SpecValidationError('  Value error, model should not be None when method is ' + method);
  const draftPath = path.resolve(model);
  const raw = readRaw(draftPath);
  if (!raw)
    throw new SpecValidationError(
      `  Value error, Invalid repository ID or local directory specified: '${model}'.\nPlease verify the following requirements:\n1. Provide a valid Hugging Face repository ID.\n2. Specify a local directory that contains a recognized configuration file.`,
    );
  const drafter = readModelConfig(draftPath);
  const archs = drafter.architectures.length > 0 ? drafter.architectures : ['LlamaForCausalLM'];
  const renamed = archs.map((a) =>
    method === 'eagle'
      ? a.startsWith('Eagle')
        ? a
        : `Eagle${a}`
      : a.startsWith('Eagle3') || a.endsWith('Eagle3')
        ? a
        : `Eagle3${a}`,
  );
  const unsupported = renamed.filter((a) => !EAGLE_ARCHS.has(a));
  if (unsupported.length > 0)
    throw new SpecValidationError(
      `  Value error, Model architectures ${pyList(renamed)} are not supported for now. Supported architectures: dict_keys(${pyList([...EAGLE_ARCHS])})`,
      drafter,
    );
  const numTokens = int(sc.num_speculative_tokens) ?? int(raw.num_lookahead_tokens) ?? 1;
  const tensorNames = safetensorsNames(draftPath);
  const draftVocab = int(raw.draft_vocab_size) ?? drafter.vocabSize;
  const loadError =
    draftVocab === target.vocabSize && tensorNames.includes('d2t')
      ? `There is no module or parameter named 'draft_id_to_target_id' in Eagle3LlamaForCausalLM. The available parameters belonging to  (Eagle3LlamaForCausalLM) are: {${tensorNames
          .filter((n) => n !== 'd2t' && n !== 't2d')
          .map((n) => `'${n.replace(/^midlayer\./, 'model.layers.0.')}'`)
          .join(', ')}}`
      : null;
  let doomed: SpecPlan['doomed'] = null;
  if (method === 'eagle3') {
    const L = target.numLayers;
    const ids = auxIds(raw) ?? [2, Math.floor(L / 2), L - 3];
    const collected = new Set(ids.filter((i) => i >= 0 && i < L)).size;
    const expected = expectedAux(raw);
    if (collected !== expected) doomed = { collected, expected };
  }
  return { method, draftPath, numTokens, drafter, raw, arch: renamed[0]!, tensorNames, loadError, doomed };
}

function pyList(xs: string[]): string {
  return `[${xs.map((x) => `'${x}'`).join(', ')}]`;
}
