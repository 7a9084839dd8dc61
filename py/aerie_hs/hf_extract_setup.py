"""Set-up of aerie_hs.hf_extract: the draft's layer ids, the capture points for the serving engine,
the forward's dtype and the target loaded with transformers. A configuration the job cannot run
with is a SetupError (exit 2), its message naming the field and the fix.
"""
import json
import os
import re
import sys

from .capture import CaptureError, sglang_capture_ids, specforge_default_aux_layers


class SetupError(Exception):
    """A configuration the job cannot run with: exit 2, the message names the field and the fix."""


def fail(message):
    raise SetupError(message)



def draft_layer_ids(path, num_layers, served_by="sglang"):
    """The draft's aux layer ids as the serving engine reads them.

    SGLang (the server drivers, src/stages/extract/capture-launch.ts draftLayerIds):
    eagle_config.eagle_aux_hidden_state_layer_ids, else SpecForge's default.
    vLLM: the top-level eagle_aux_hidden_state_layer_ids first, then eagle_config's
    (vllm==0.32.0:vllm/v1/worker/gpu_model_runner.py:5251-5284), else its default
    (2, L//2, L-3) (model_executor/models/interfaces.py:1712-1733)."""
    try:
        with open(path) as fh:
            cfg = json.load(fh)
    except (OSError, ValueError) as err:
        fail("stages.extract.draft-model-config: %s is not a readable JSON file (%s). Fix: point it (or "
             "stages.train.draft-model-config) at the draft config.json" % (path, err))
    cfg = cfg if isinstance(cfg, dict) else {}
    nested = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    ids = (cfg.get("eagle_aux_hidden_state_layer_ids") or nested) if served_by == "vllm" else nested
    if ids is None:
        if served_by == "vllm":
            return [2, num_layers // 2, num_layers - 3], "vLLM's default for a %d-layer target" % num_layers
        return specforge_default_aux_layers(num_layers), "SpecForge's default for a %d-layer target" % num_layers
    if not (isinstance(ids, list) and len(ids) == 3 and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < num_layers for x in ids)):
        fail("stages.extract.draft-model-config (%s): eagle_aux_hidden_state_layer_ids is %s: three layer "
             "ids below the target's %d layers are needed" % (path, json.dumps(ids), num_layers))
    return list(ids), "the draft config's eagle_aux_hidden_state_layer_ids"


def capture_points(draft_ids, num_layers, served_by="sglang"):
    """Layer-input ids to capture (capture_from_hf's convention) for the engine that will serve.

    SGLang feeds the drafter layer id's output, the input of layer id+1 (capture.sglang_capture_ids).
    vLLM feeds the residual stream entering layer id, after id layers
    (vllm==0.32.0:vllm/model_executor/models/llama.py:427-441): the id itself; ids must be distinct
    and ascending, since vLLM keeps them as a sorted set (interfaces.py:1577-1578)."""
    if served_by != "vllm":
        return sglang_capture_ids(draft_ids, num_layers)
    ids = [int(i) for i in draft_ids]
    if sorted(set(ids)) != ids or any(i < 0 or i >= num_layers for i in ids):
        raise CaptureError("aux layer ids %s: vLLM needs distinct ascending ids in 0..%d" % (ids, num_layers - 1))
    return ids


def _text_config(cfg):
    return getattr(cfg, "text_config", None) or getattr(cfg, "language_config", None) or cfg


def resolve_dtype(torch, name, model_dir):
    """--dtype auto: the checkpoint's own dtype (config.json torch_dtype / dtype), else bfloat16."""
    if name == "auto":
        try:
            with open(os.path.join(model_dir, "config.json")) as fh:
                raw = json.load(fh)
        except (OSError, ValueError):
            raw = {}
        text = raw.get("text_config") or raw
        name = text.get("torch_dtype") or text.get("dtype") or raw.get("torch_dtype") or raw.get("dtype") or "bfloat16"
    dt = getattr(torch, str(name).replace("torch.", ""), None)
    if not isinstance(dt, torch.dtype) or not dt.is_floating_point:
        fail("stages.extract.dtype: %r is not a torch floating dtype. Fix: use auto, bfloat16, float16 or float32" % name)
    return dt


def load_model(torch, args):
    import transformers
    from transformers import AutoModelForCausalLM

    dtype = resolve_dtype(torch, args.dtype, args.model)
    major_minor = tuple(int(x) for x in re.findall(r"\d+", transformers.__version__)[:2])
    # transformers 4.56 renamed torch_dtype to dtype (5.x warns on the old name).
    kw = {"dtype": dtype} if major_minor >= (4, 56) else {"torch_dtype": dtype}
    try:
        model = AutoModelForCausalLM.from_pretrained(args.model, trust_remote_code=args.trust_remote_code, **kw)
    except (OSError, ValueError, EnvironmentError) as err:
        fail("stages.extract (driver transformers): target.model-path %s cannot be loaded with transformers' "
             "AutoModelForCausalLM: %s: %s. Fix: point target.model-path at the full model directory on the host "
             "(config.json and its weights)" % (args.model, type(err).__name__, (str(err).strip().splitlines() or [""])[0].rstrip(".")))
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        fail("stages.extract.device: cuda, but torch in %s sees no GPU. Fix: set stages.extract.device: auto or cpu" % sys.executable)
    model.to(device).eval()
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(inner, "norm"):
        fail("stages.extract (driver transformers): %s is a %s, whose decoder is not model.model.layers with a final "
             "model.model.norm (the Llama layout aerie's capture hooks). Fix: use another extract driver for this target"
             % (args.model, type(model).__name__))
    return model, dtype, device
