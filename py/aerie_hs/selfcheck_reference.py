"""The self-check's reference forward (py/aerie_hs/selfcheck.py): for a target small enough to run
here, a float32 transformers forward of one sample names the layer each dumped block came from.
It is the only check that sees aux blocks captured one layer off while the final state is right.
"""
import os

import numpy as np


def rel(a, b):
    d = np.linalg.norm(a - b)
    s = max(np.linalg.norm(a), np.linalg.norm(b))
    return float(d / s) if s > 0 else 0.0


def aux_hs_indices(aux_layers, n_layers):
    """transformers hidden_states indices of the three aux blocks.

    A dump's `aux_layers` are SGLang's capture ids (aerie-hs/1, py/aerie_hs/capture.py): the
    layers whose INPUT was captured, i.e. the draft config's eagle_aux_hidden_state_layer_ids
    + 1 (sglang 0.5.23 srt/models/llama.py:939-941). Without ids SGLang captures the inputs of
    layers [2, L//2, L-3] (:936). transformers' hidden_states[i] is the input of layer i and
    hidden_states[L] the post-norm final state (transformers 5.17.0
    utils/output_capturing.py:115-124 and :296-306), so a capture id is its own index.
    """
    if aux_layers is None:
        return [2, n_layers // 2, n_layers - 3]
    return [int(k) for k in aux_layers]


def reference_check(target, rid, ids, aux, final, aux_layers, max_bytes, max_tokens):
    """Which transformers layer each dumped block is closest to, for a small target. None if skipped."""
    total = 0
    for root, _d, files in os.walk(target["dir"]):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".safetensors"))
    if total > max_bytes:
        return {"skipped": f"target weights are {total} bytes > --reference-max-bytes {max_bytes}"}, []
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        return {"skipped": f"no torch/transformers here ({e.name})"}, []
    model = AutoModelForCausalLM.from_pretrained(target["dir"], dtype=torch.float32).eval()
    n = min(len(ids), max_tokens)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([list(ids[:n])]), output_hidden_states=True)
    hs = [x[0].float().numpy() for x in out.hidden_states]
    n_layers = len(hs) - 1
    want = aux_hs_indices(aux_layers, n_layers)
    h = final.shape[-1]
    fig = {"tokens": n, "aux_expected_layer_input": want, "aux_best_layer_input": [], "aux_rel": [], "final_best": None}
    msgs = []
    for j in range(3):
        dists = [rel(aux[:n, j * h : (j + 1) * h], s) for s in hs]
        best = int(np.argmin(dists))
        fig["aux_best_layer_input"].append(best)
        fig["aux_rel"].append(dists[want[j]] if 0 <= want[j] < len(dists) else None)
        if best != want[j]:
            msgs.append(f"{rid}: aux block {j} matches the input of layer {best} (relative difference {dists[best]:.3g}), "
                        f"not the configured input of layer {want[j]} (aux layer id {want[j] - 1}; difference "
                        f"{dists[want[j]] if 0 <= want[j] < len(dists) else float('nan'):.3g})")
    dists = [rel(final[:n], s) for s in hs]
    fig["final_best"] = int(np.argmin(dists))
    fig["final_rel"] = dists[-1]
    if fig["final_best"] != n_layers:
        msgs.append(f"{rid}: hidden_state matches hidden_states[{fig['final_best']}] of the reference forward, "
                    f"not the final post-norm state hidden_states[{n_layers}]")
    return fig, msgs
