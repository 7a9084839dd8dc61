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

The set-up (layer ids, capture points, dtype, the model) is in hf_extract_setup.py, the files it
writes and finds in hf_extract_files.py.
"""
import argparse
import json
import os
import re
import sys
import time

from .capture import capture_from_hf
from .chat_templates import TEMPLATES, template
from .ckpt import group_dir
from .hf_extract_files import bf16_raw, complete, keep_for_selfcheck, picks_for, stale_files, sweep_tmp, write_ckpt, write_json_atomic
from .hf_extract_setup import SetupError, _text_config, capture_points, draft_layer_ids, fail, load_model
from .tokens import SampleError, parse_line, tokenize
from .tokens_crosscheck import Disagreement, cross_check, specforge_reference

PREFIX = "aerie_hf_extract"
# The ids the server drivers accept (capture.py _RID, src/stages/extract/samples.ts CAPTURE_RID): the
# self-check names its files after them.
_RID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def emit(kind, payload):
    sys.stdout.write(json.dumps({kind: payload}) + "\n")
    sys.stdout.flush()


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
