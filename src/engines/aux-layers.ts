/**
 * Which of the target's hidden states each engine hands an EAGLE-3 drafter, for the layer ids
 * a draft config names. Counted as transformers counts `output_hidden_states` (index 0 the
 * embeddings, index k the state after k decoder layers), so extraction on the host can take
 * exactly the states the serving engine will feed:
 *  - SGLang captures the input of layer id + 1, i.e. the state after id + 1 layers
 *    (sglang==0.5.23:srt/models/llama.py:939-941; py/aerie_hs/capture.py sglang_capture_ids).
 *  - vLLM captures the state entering layer id, i.e. after id layers, and uses the draft
 *    config's ids as they are (vllm==0.32.0:vllm/model_executor/models/llama.py:427-441,
 *    interfaces.py:1601-1611; v1/worker/gpu_model_runner.py:5251-5284 adds nothing).
 * The same draft config thus asks the two engines for states one layer apart. A drafter
 * trained on one engine's states and served by the other reads shifted features.
 */
import type { EngineName } from './engine.js';

export function servedHiddenStateIndices(engine: EngineName, draftLayerIds: readonly number[]): number[] {
  return draftLayerIds.map((id) => (engine === 'vllm' ? id : id + 1));
}
