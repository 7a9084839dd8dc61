"""Hidden states from a transformers forward pass on the host, in SpecForge's offline layout.

The `transformers` extract driver: no model server. For targets an SGLang capture cannot serve
(vLLM 0.32's own extraction is GPU-only) and small enough to load with transformers where the
extraction runs, CPU or GPU. Run as a detached job by aerie (src/stages/extract/hf-driver.ts):

  python -m aerie_hs.hf_extract --model DIR --data conversations.jsonl --out OUT \
      --draft-model-config draft.json --chat-template llama3 --max-length 2048 \
      [--file-group-size 2000] [--dtype auto] [--device auto] [--batch-size 16] \
      [--cross-check auto] [--selfcheck-samples 8] [--selfcheck-final 32] [--trust-remote-code]

What it makes is what the patched-server driver makes for the same target, tensor for tensor:
- tokens: each sample's input_ids and loss_mask by aerie_hs.tokens (SpecForge's preprocessing
  rules, chat template, max-length; SpecForge's own function cross-checks where importable);
- aux_hidden_state: the residual stream at the input of layer id+1 for each draft layer id
  (eagle_config.eagle_aux_hidden_state_layer_ids, else SpecForge's default [1, L/2-1, L-4]),
  i.e. layer id's output, transformers' hidden_states[id+1]: the SGLang capture points
  (capture.sglang_capture_ids, CAPTURE.md), taken by capture.capture_from_hf;
- hidden_state: the final norm's output (post-norm);
- OUT/rows_<g>-<g+G>/data_<i>.ckpt, written by aerie_hs's own torch.save writer
  (torch_save.TorchZip, byte-identical to torch.save and to ckpt.py's converter) under a
  hidden temp name, then renamed; i numbers the tokenized samples in input order;
- OUT/index.jsonl {i, id, tokens}, OUT/extract_error.jsonl {id?, line, error},
  OUT/selfcheck/{dumps,rows}/ for aerie_hs.selfcheck (the first --selfcheck-samples samples and a
  spread up to --selfcheck-final), OUT/hf_extract.json (the summary).

One forward per sample, unpadded (as SGLang prefills a request), so a sample's states do not
depend on what it was batched with; --batch-size samples are gathered, written and released at
a time, which bounds memory to one forward plus one batch's states.

Resumable: a relaunch re-tokenizes (deterministic), and skips each sample whose file is in
place and complete (ckpt.verify_features: its directory, record, ids, mask and sizes).

stdout: one JSON line per batch {"aerie_hf_extract": {phase, done, total, ok, skipped, errors,
tokens, bytes, rate}}, then {"aerie_hf_extract_summary": {...}}. Exit status: 0 done (per-sample
errors included), 2 a set-up error (printed as "aerie_hf_extract: error: <field>: <what>. Fix: ..."),
3 SpecForge's preprocessing disagrees with aerie's tokens.
"""
import argparse
import json
import os
import re
import struct
import sys
import time
import zipfile

from .capture import CaptureError, capture_from_hf, input_ids_sha256, sglang_capture_ids, specforge_default_aux_layers, write_safetensors
from .capture import FORMAT as DUMP_FORMAT
from .chat_templates import TEMPLATES, template
from .ckpt import feature_layout, group_dir, verify_features
from .safetensors_dump import DumpError
from .tokens import SampleError, parse_line, tokenize
from .tokens_crosscheck import Disagreement, cross_check, specforge_reference
from .torch_save import ALIGN, TorchZip, feature_pickle

PREFIX = "aerie_hf_extract"
# The ids the server drivers accept (capture.py _RID, src/stages/extract/samples.ts CAPTURE_RID): the
# self-check names its files after them.
_RID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_DATA = re.compile(r"^data_(\d+)\.ckpt$")
_TMP = re.compile(r"^\.data_\d+\.ckpt\.\d+\.tmp$")


class SetupError(Exception):
    """A configuration the job cannot run with: exit 2, the message names the field and the fix."""


def fail(message):
    raise SetupError(message)


def emit(kind, payload):
    sys.stdout.write(json.dumps({kind: payload}) + "\n")
    sys.stdout.flush()


def write_json_atomic(path, obj):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---- set-up ------------------------------------------------------------------------------------

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


# ---- files ------------------------------------------------------------------------------------

def bf16_raw(torch, x):
    return x.detach().to("cpu", torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()


def write_ckpt(final_path, ids, mask, aux_raw, hid_raw, hidden):
    """SpecForge's record (ckpt.py's key order and shapes) with torch_save's writer: temp name, rename."""
    t = len(ids)
    stem = os.path.basename(final_path).rsplit(".", 1)[0]
    tmp = os.path.join(os.path.dirname(final_path), ".%s.%d.tmp" % (os.path.basename(final_path), os.getpid()))
    try:
        with open(tmp, "wb", buffering=0) as f:
            z = TorchZip(f, stem)
            z.add("data.pkl", feature_pickle(feature_layout(t, hidden)))
            z.add(".format_version", b"1")
            z.add(".storage_alignment", str(ALIGN).encode())
            z.add("byteorder", b"little")
            z.add("data/0", struct.pack("<%dq" % t, *ids))
            z.add("data/1", struct.pack("<%dq" % t, *mask))
            z.add("data/2", aux_raw)
            z.add("data/3", hid_raw)
            z.finish()
            os.fsync(f.fileno())
        size = z.pos
        os.replace(tmp, final_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return size


def complete(path, ids, mask, hidden):
    """The file in place is this sample's, whole (a relaunch skips it)."""
    if not os.path.exists(path):
        return False
    try:
        return verify_features(path, ids, mask) == hidden
    except (DumpError, OSError, ValueError, KeyError, struct.error, zipfile.BadZipFile):
        return False


def sweep_tmp(out):
    """Temp files of an interrupted launch: never a sample's file, removed."""
    for root, _dirs, files in os.walk(out):
        for name in files:
            if _TMP.match(name) or name.endswith(".tmp"):
                try:
                    os.unlink(os.path.join(root, name))
                except FileNotFoundError:
                    pass


def stale_files(out, count):
    """data_<i>.ckpt at or beyond this dataset's sample count: an earlier dataset's, removed."""
    gone = 0
    for root, _dirs, files in os.walk(out):
        for name in files:
            m = _DATA.match(name)
            if m and int(m.group(1)) >= count:
                os.unlink(os.path.join(root, name))
                gone += 1
    return gone


def picks_for(total, early, final):
    """Sample numbers kept for the self-check: the first `early`, then a spread up to `final` (samples.ts selfCheckPicks)."""
    first = list(range(min(early, total)))
    picked = set(first)
    rest, more = total - len(first), max(0, final - len(first))
    n = min(more, rest)
    if n > 0:
        step = rest / n
        for k in range(n):
            picked.add(len(first) + int(k * step))
    return picked


def keep_for_selfcheck(out, sid, ids, mask, aux_raw, hid_raw, hidden, capture_ids, greedy_next):
    """The dump and row aerie_hs.selfcheck reads (src/stages/extract/selfcheck.ts's layout), each atomically."""
    d = os.path.join(out, "selfcheck")
    os.makedirs(os.path.join(d, "dumps"), exist_ok=True)
    os.makedirs(os.path.join(d, "rows"), exist_ok=True)
    t = len(ids)
    meta = {"format": DUMP_FORMAT, "rid": sid, "tokens": str(t), "aux_layers": json.dumps(list(capture_ids)),
            "tp_rank": "0", "input_ids_sha256": input_ids_sha256(ids), "producer": "aerie_hs.hf_extract"}
    write_safetensors(os.path.join(d, "dumps", sid + ".safetensors"), {
        "aux_hidden_state": ("BF16", [t, len(capture_ids) * hidden], aux_raw),
        "hidden_state": ("BF16", [t, hidden], hid_raw),
    }, meta)
    write_json_atomic(os.path.join(d, "rows", sid + ".json"),
                      {"id": sid, "input_ids": ids, "loss_mask": mask, "greedy_next": int(greedy_next)})


# ---- the run ----------------------------------------------------------------------------------

def samples(path, tokenizer, tpl, max_length, reference, batch):
    """(line, id, ids, mask) or (line, id, None, error), in input order; SpecForge cross-checks per batch."""
    pending = []

    def flush():
        if reference is not None:
            cross_check(reference, tokenizer, [p[4] for p in pending if p[4] is not None], max_length)
        for p in pending:
            yield p[:4]
        pending.clear()

    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            parsed, reason = parse_line(line) if line.strip() else (None, "blank line")
            if parsed is None:
                pending.append((n, None, None, "tokens: " + reason, None))
            else:
                sid, conv = parsed
                try:
                    ids, mask = tokenize(tokenizer, conv, tpl, max_length)
                    pending.append((n, sid, (ids, mask), None, (sid, conv, ids, mask)))
                except SampleError as err:
                    pending.append((n, sid, None, "tokens: %s" % err, None))
            if len(pending) >= batch:
                for x in flush():
                    yield x
    for x in flush():
        yield x


def run(args):
    import torch
    from transformers import AutoTokenizer

    try:
        tpl = template(args.chat_template)
    except KeyError as err:
        fail("stages.extract.chat-template: %s. Fix: use one of %s" % (err.args[0], ", ".join(sorted(TEMPLATES))))
    if not os.path.exists(args.data):
        fail("stages.extract: the generated conversations %s are not on this host. Fix: rerun the generate stage" % args.data)
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
    except Exception as err:  # noqa: BLE001 - any load failure is a set-up error naming the path
        fail("stages.extract (driver transformers): target.model-path %s: cannot load its tokenizer: %s: %s. Fix: point "
             "target.model-path at the full model directory (tokenizer files included)" % (args.model, type(err).__name__, err))
    reference = None
    if args.cross_check != "off":
        reference, why_not = specforge_reference(args.chat_template, tpl)
        if args.cross_check == "require" and reference is None:
            fail("stages.extract.cross-check: require, but SpecForge is not importable by %s (%s)" % (sys.executable, why_not))

    model, dtype, device = load_model(torch, args)
    cfg = _text_config(model.config)
    L, H = int(cfg.num_hidden_layers), int(cfg.hidden_size)
    draft_ids, how = draft_layer_ids(args.draft_model_config, L, args.served_by)
    try:
        capture_ids = capture_points(draft_ids, L, args.served_by)
    except CaptureError as err:
        fail("stages.extract.draft-model-config (%s): %s" % (args.draft_model_config, err))
    head = model.get_output_embeddings()

    os.makedirs(args.out, exist_ok=True)
    sweep_tmp(args.out)
    with open(args.data, "rb") as fh:
        lines = sum(1 for _ in fh)
    # Picks are by sample number among this dataset's lines: a rerun keeps the same ones.
    picks = picks_for(lines, args.selfcheck_samples, args.selfcheck_final)
    emit(PREFIX, {"phase": "loaded", "done": 0, "total": lines, "device": device, "dtype": str(dtype).replace("torch.", ""),
                  "layers": L, "hidden": H, "draft_layers": draft_ids, "capture_ids": capture_ids, "layers_from": how})

    index_tmp = os.path.join(args.out, ".index.jsonl.%d.tmp" % os.getpid())
    errors_tmp = os.path.join(args.out, ".extract_error.jsonl.%d.tmp" % os.getpid())
    counts = {"lines": 0, "ok": 0, "written": 0, "skipped": 0, "errors": 0}
    totals = {"tokens": 0, "bytes": 0}
    started = time.time()
    batch = []
    seen = set()

    def report(phase="extracting"):
        secs = time.time() - started
        emit(PREFIX, {"phase": phase, "done": counts["lines"], "total": lines, "ok": counts["ok"],
                      "written": counts["written"], "skipped": counts["skipped"], "errors": counts["errors"],
                      "tokens": totals["tokens"], "bytes": totals["bytes"],
                      "rate": round(counts["written"] / secs, 3) if secs > 0 else 0.0})

    def run_batch():
        # One unpadded forward per sample; the batch's states are written, then released.
        for i, sid, ids, mask, keep in batch:
            aux, final = capture_from_hf(model, torch.tensor(ids, dtype=torch.long, device=device), capture_ids)
            aux_raw, hid_raw = bf16_raw(torch, aux), bf16_raw(torch, final)
            if keep:
                with torch.no_grad():
                    greedy = int(torch.argmax(head(final[-1:].to(head.weight.dtype))[0]).item())
                keep_for_selfcheck(args.out, sid, ids, mask, aux_raw, hid_raw, H, capture_ids, greedy)
            path = os.path.join(group_dir(args.out, i, args.file_group_size), "data_%d.ckpt" % i)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            totals["bytes"] += write_ckpt(path, ids, mask, aux_raw, hid_raw, H)
            counts["written"] += 1
            del aux, final, aux_raw, hid_raw
        batch.clear()
        report()

    with open(index_tmp, "w", encoding="utf-8") as index, open(errors_tmp, "w", encoding="utf-8") as errors:
        for n, sid, got, error in samples(args.data, tokenizer, tpl, args.max_length, reference, args.tokenize_batch):
            counts["lines"] += 1
            if got is None:
                counts["errors"] += 1
                errors.write(json.dumps({**({"id": sid} if sid is not None else {}), "line": n, "error": error}) + "\n")
                continue
            ids, mask = got
            why = ("id: a sample id must be 1-200 of [A-Za-z0-9._-] starting with a letter or digit" if not _RID.match(sid)
                   else "id: a second sample with this id (one feature file per id)" if sid in seen else None)
            if why:
                counts["errors"] += 1
                errors.write(json.dumps({"id": sid, "line": n, "error": why}) + "\n")
                continue
            seen.add(sid)
            i = counts["ok"]
            counts["ok"] += 1
            totals["tokens"] += len(ids)
            index.write(json.dumps({"i": i, "id": sid, "tokens": len(ids)}) + "\n")
            path = os.path.join(group_dir(args.out, i, args.file_group_size), "data_%d.ckpt" % i)
            keep = (n - 1) in picks
            kept = not keep or os.path.exists(os.path.join(args.out, "selfcheck", "rows", sid + ".json"))
            if kept and complete(path, ids, mask, H):
                counts["skipped"] += 1
                totals["bytes"] += os.path.getsize(path)
                continue
            batch.append((i, sid, ids, mask, keep))
            if len(batch) >= args.batch_size:
                run_batch()
        if batch:
            run_batch()
        index.flush()
        os.fsync(index.fileno())
        errors.flush()
        os.fsync(errors.fileno())
    os.replace(index_tmp, os.path.join(args.out, "index.jsonl"))
    os.replace(errors_tmp, os.path.join(args.out, "extract_error.jsonl"))
    removed = stale_files(args.out, counts["ok"])
    summary = {"format": "aerie-hf-extract/1", "samples": args.data, "model": args.model, "device": device,
               "dtype": str(dtype).replace("torch.", ""), "hidden_size": H, "num_layers": L,
               "draft_layer_ids": draft_ids, "capture_ids": capture_ids, "layers_from": how,
               "tokens_method": "aerie+specforge" if reference is not None else "aerie",
               "chat_template": args.chat_template, "max_length": args.max_length,
               "file_group_size": args.file_group_size, **counts, **totals, "stale_removed": removed,
               "seconds": round(time.time() - started, 3)}
    write_json_atomic(os.path.join(args.out, "hf_extract.json"), summary)
    report("done")
    emit(PREFIX + "_summary", summary)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m aerie_hs.hf_extract", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="target model directory (config, weights, tokenizer)")
    ap.add_argument("--data", required=True, help="the generate stage's conversations jsonl ({id, conversations})")
    ap.add_argument("--out", required=True, help="SpecForge's offline layout goes here")
    ap.add_argument("--draft-model-config", required=True, help="draft config.json: eagle_config.eagle_aux_hidden_state_layer_ids")
    ap.add_argument("--chat-template", required=True)
    ap.add_argument("--max-length", required=True, type=int)
    ap.add_argument("--file-group-size", type=int, default=2000)
    ap.add_argument("--dtype", default="auto", help="the forward's dtype: auto (the checkpoint's), bfloat16, float16, float32")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--batch-size", type=int, default=16, help="samples gathered, written and released at a time")
    ap.add_argument("--tokenize-batch", type=int, default=64, help="conversations per SpecForge cross-check call")
    ap.add_argument("--cross-check", choices=("auto", "require", "off"), default="auto")
    ap.add_argument("--selfcheck-samples", type=int, default=8)
    ap.add_argument("--selfcheck-final", type=int, default=32)
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument("--served-by", choices=("sglang", "vllm"), default="sglang",
                    help="the engine that will serve the drafter: which hidden states it feeds for the draft's layer ids")
    args = ap.parse_args(argv)
    for name in ("max_length", "file_group_size", "batch_size", "tokenize_batch"):
        if getattr(args, name) < 1:
            print("%s: error: --%s must be a positive integer" % (PREFIX, name.replace("_", "-")), file=sys.stderr)
            return 2
    try:
        return run(args)
    except SetupError as err:
        print("%s: error: %s" % (PREFIX, err), file=sys.stderr)
        sys.stderr.flush()
        return 2
    except Disagreement as err:
        print("%s: tokens disagree: %s" % (PREFIX, err), file=sys.stderr)
        sys.stderr.flush()
        return 3


if __name__ == "__main__":
    sys.exit(main())
