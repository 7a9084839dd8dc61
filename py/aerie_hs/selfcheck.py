"""Extraction self-check: do the dumped hidden states belong to these tokens and these layers?

Runs on the GPU host, on a run's first samples before extraction commits to all of them and
again before the stage counts the run as good. numpy only; torch (with transformers) is used
when present for a reference forward of small targets, which is the one check that tells an
aux block taken one layer off from the right one.

Checks, each failing with a message naming what disagrees:
  tokens   a dump's T equals len(input_ids) (and its input_ids_sha256, when recorded);
  teacher  the final states through lm_head predict the next input token on the assistant
           spans (pooled agreement >= --min-agreement), better than they predict the token
           itself or the one after it (which is what a one-token misalignment looks like);
  final    the final state is post-norm: per token, rms(h / norm.weight) is 1;
  greedy   at the last position the argmax is the server's own greedy next token;
  aux      three distinct blocks: finite, not zero, not copies of each other or of the final
           state, RMS plausible;
  reference (torch, small targets) each aux block and the final state match the layer they
           are configured to come from better than any other layer.

CLI: python -m aerie_hs.selfcheck --model DIR --dumps DIR --ids ids.jsonl [--greedy greedy.jsonl]
     [--samples N]; JSON verdict on stdout; exit 0 when ok, 1 when a check failed, 2 on bad input.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

from .safetensors_dump import ids_sha256
from .selfcheck_reference import reference_check, rel

# Regenerated assistant tokens are the target's own samples. Greedy regeneration scores near 1
# (only bf16 near-ties and re-tokenisation seams differ); sampled regeneration scores the mean
# top-1 probability, 0.6-0.9 for chat models at temperature <= 1. A one-token misalignment or
# a state from the wrong depth scores about the repetition rate of the text (< 0.15 in
# practice; 0.00-0.07 measured on the tiny target, test/real-cpu/selfcheck.test.ts). 0.5 sits
# between with room on both sides.
MIN_AGREEMENT = 0.5
# Post-norm states divided by the norm weight have RMS exactly 1 up to bf16 rounding and eps.
NORM_RMS_TOL = 0.05
# Two blocks closer than this (relative L2) are the same capture twice.
DISTINCT_MIN = 1e-3
RMS_RANGE = (1e-4, 1e4)
# bf16 keeps 8 significant bits: a dumped value is within 2^-8 of the server's.
BF16_U = 2.0 ** -8

_ST_DTYPES = {"BF16": (np.uint16, 2), "F16": (np.float16, 2), "F32": (np.float32, 4), "I64": (np.int64, 8), "I32": (np.int32, 4)}


class CheckError(Exception):
    """Bad input (a file missing or malformed): exit 2, not a verdict on the states."""


class SafeTensors:
    """A safetensors file read with the stdlib and numpy: 8-byte LE header length, JSON, data."""

    def __init__(self, path):
        self.path = path
        try:
            with open(path, "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(n))
        except (OSError, struct.error, ValueError) as e:
            raise CheckError(f"{path}: not a readable safetensors file ({e})")
        self.base = 8 + n
        self.meta = header.pop("__metadata__", {}) or {}
        self.entries = header

    def array(self, name):
        """The tensor as float32 (floats) or its integer dtype, memory-mapped where possible."""
        if name not in self.entries:
            raise CheckError(f"{self.path}: no tensor {name!r} (has {sorted(self.entries)})")
        e = self.entries[name]
        if e["dtype"] not in _ST_DTYPES:
            raise CheckError(f"{self.path}: {name} is {e['dtype']}; the self-check reads BF16, F16, F32, I64, I32")
        np_dtype, width = _ST_DTYPES[e["dtype"]]
        start, end = e["data_offsets"]
        count = (end - start) // width
        raw = np.memmap(self.path, dtype=np_dtype, mode="r", offset=self.base + start, shape=(count,)).reshape(e["shape"])
        if e["dtype"] == "BF16":
            return bf16_to_f32(raw)
        if e["dtype"] == "F16":
            return raw.astype(np.float32)
        return np.asarray(raw)


def bf16_to_f32(u16):
    # bf16 is the top half of a float32: shift the bits into place, no rounding involved.
    return (np.asarray(u16, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _text_config(cfg):
    # Multimodal checkpoints (Kimi-K2.5 and kin) nest the language model's config.
    return cfg.get("text_config") or cfg.get("language_config") or cfg


def load_target(model_dir):
    """lm_head [V, H] (or the tied embedding), the final norm weight when found, and the config."""
    try:
        with open(os.path.join(model_dir, "config.json")) as fh:
            cfg = json.load(fh)
    except (OSError, ValueError) as e:
        raise CheckError(f"--model {model_dir}: no readable config.json ({e})")
    text = _text_config(cfg)
    tied = bool(text.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False)))
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as fh:
            weight_map = json.load(fh)["weight_map"]
    elif os.path.exists(os.path.join(model_dir, "model.safetensors")):
        weight_map = {n: "model.safetensors" for n in SafeTensors(os.path.join(model_dir, "model.safetensors")).entries}
    else:
        raise CheckError(f"--model {model_dir}: neither model.safetensors.index.json nor model.safetensors")

    def find(suffix, exclude="layers."):
        exact = [n for n in weight_map if n == suffix]
        hits = exact or sorted((n for n in weight_map if n.endswith("." + suffix) and exclude not in n), key=len)
        return hits[0] if hits else None

    head_name = find("embed_tokens.weight") if tied else find("lm_head.weight")
    if head_name is None:
        want = "the tied embedding (embed_tokens.weight)" if tied else "lm_head.weight"
        raise CheckError(f"--model {model_dir}: the weight map has no {want}")
    head = SafeTensors(os.path.join(model_dir, weight_map[head_name])).array(head_name)
    norm_name = find("model.norm.weight") or find("norm.weight")
    norm = SafeTensors(os.path.join(model_dir, weight_map[norm_name])).array(norm_name) if norm_name else None
    return {"head": head, "head_name": head_name, "norm": norm, "norm_name": norm_name, "config": text, "dir": model_dir}


def argmax_logits(h, head, chunk=256):
    """argmax over h @ head.T, chunked so logits never hold more than chunk x V floats."""
    try:
        import torch  # faster CPU matmul where present; the verdict is the same

        w = torch.from_numpy(np.ascontiguousarray(head))
        out = [torch.from_numpy(np.ascontiguousarray(h[i : i + chunk])).matmul(w.T).argmax(-1).numpy() for i in range(0, len(h), chunk)]
    except ImportError:
        out = [(h[i : i + chunk] @ head.T).argmax(-1) for i in range(0, len(h), chunk)]
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def check_tokens(rid, st, ids):
    msgs = []
    t_aux, t_fin = (st.entries[n]["shape"][0] if n in st.entries else None for n in ("aux_hidden_state", "hidden_state"))
    fig = {"T_ids": len(ids), "T_aux": t_aux, "T_final": t_fin}
    for name, t in (("aux_hidden_state", t_aux), ("hidden_state", t_fin)):
        if t is None:
            msgs.append(f"{rid}: the dump has no {name}")
        elif t != len(ids):
            msgs.append(f"{rid}: {name} has T={t} rows but input_ids has {len(ids)} tokens")
    if "tokens" in st.meta and str(st.meta["tokens"]) != str(len(ids)):
        msgs.append(f"{rid}: the dump's metadata says tokens={st.meta['tokens']}, input_ids has {len(ids)}")
    sha = st.meta.get("input_ids_sha256")
    fig["sha_match"] = None if sha is None else sha == ids_sha256(ids)
    if fig["sha_match"] is False:
        msgs.append(f"{rid}: the dump's input_ids_sha256 is not the sha256 of these input_ids: the dump was made from other tokens")
    return fig, msgs


def teacher_counts(pred, ids, mask):
    """(matches, positions) of argmax(h_t) against the next input token, over assistant targets;
    and, on the targets where ids[t], ids[t+1], ids[t+2] all differ (repeated text cannot tell
    the alignments apart), against each of the three: a true alignment predicts t+1 best."""
    ids = np.asarray(ids)
    mask = np.asarray(mask)
    n = len(ids)
    out = {"next": (0, 0), "d_same": (0, 0), "d_next": (0, 0), "d_skip": (0, 0)}
    if n < 2:
        return out
    sel = mask[1:] == 1
    out["next"] = (int((pred[: n - 1][sel] == ids[1:][sel]).sum()), int(sel.sum()))
    if n < 3:
        return out
    a, b, c, p = ids[:-2], ids[1:-1], ids[2:], pred[: n - 2]
    d = (mask[1:-1] == 1) & (a != b) & (b != c) & (a != c)
    for key, x in (("d_same", a), ("d_next", b), ("d_skip", c)):
        out[key] = (int((p[d] == x[d]).sum()), int(d.sum()))
    return out


def check_final_norm(rid, final, norm):
    if norm is None:
        return None, []
    w = np.where(np.abs(norm) < 1e-6, np.nan, norm)
    rms = np.sqrt(np.nanmean((final / w) ** 2, axis=-1))
    med = float(np.nanmedian(rms)) if rms.size else float("nan")
    msgs = []
    if not (abs(med - 1.0) <= NORM_RMS_TOL):
        msgs.append(f"{rid}: hidden_state is not the final post-norm state: rms(h / norm.weight) is {med:.4g} per token, "
                    "1 after the model's final norm (a state from before the norm or another layer)")
    return med, msgs


def check_greedy(rid, final_last, head, greedy):
    logits = head @ final_last
    top = int(np.argmax(logits))
    fig = {"expected": int(greedy), "predicted": top}
    if top == greedy:
        return fig, []
    if not 0 <= greedy < len(logits):
        return fig, [f"{rid}: greedy_next {greedy} is outside the vocabulary ({len(logits)})"]
    gap = float(logits[top] - logits[greedy])
    # The dump rounded h to bf16: each logit may move by up to 2^-8 * sum|h_i w_vi|.
    bound = BF16_U * float(np.abs(final_last) @ (np.abs(head[top]) + np.abs(head[greedy])))
    fig.update({"gap": gap, "bf16_bound": bound})
    if gap <= bound:
        fig["within_bf16"] = True
        return fig, []
    return fig, [f"{rid}: at the last position the states predict token {top} but the server's greedy next token is {greedy} "
                 f"(logit gap {gap:.4g} > bf16 rounding bound {bound:.4g})"]


def check_aux(rid, aux, final):
    msgs = []
    h = final.shape[-1]
    if aux.shape[-1] != 3 * h:
        return {"width": aux.shape[-1]}, [f"{rid}: aux_hidden_state is {aux.shape[-1]} wide, three layers of hidden size {h} make {3 * h}"]
    blocks = [aux[:, i * h : (i + 1) * h] for i in range(3)]
    fig = {"rms": [], "final_rms": None, "pairwise_rel": {}, "rel_to_final": []}
    for name, x in [("aux block %d" % i, b) for i, b in enumerate(blocks)] + [("hidden_state", final)]:
        bad = int((~np.isfinite(x)).sum())
        if bad:
            msgs.append(f"{rid}: {name} has {bad} NaN/Inf values")
    if msgs:
        return fig, msgs
    for i, b in enumerate(blocks):
        r = float(np.sqrt(np.mean(b.astype(np.float64) ** 2))) if b.size else 0.0
        fig["rms"].append(r)
        if r == 0.0:
            msgs.append(f"{rid}: aux block {i} is all zeros: that layer was never captured")
        elif not RMS_RANGE[0] <= r <= RMS_RANGE[1]:
            msgs.append(f"{rid}: aux block {i} has RMS {r:.3g}, outside {RMS_RANGE} for a residual stream")
    fig["final_rms"] = float(np.sqrt(np.mean(final.astype(np.float64) ** 2))) if final.size else 0.0
    for i in range(3):
        for j in range(i + 1, 3):
            d = rel(blocks[i], blocks[j])
            fig["pairwise_rel"][f"{i}-{j}"] = d
            if d < DISTINCT_MIN and fig["rms"][i] > 0:
                msgs.append(f"{rid}: aux blocks {i} and {j} are the same values (relative difference {d:.2g}): one layer captured twice")
        d = rel(blocks[i], final)
        fig["rel_to_final"].append(d)
        if d < DISTINCT_MIN and fig["rms"][i] > 0:
            msgs.append(f"{rid}: aux block {i} equals hidden_state (relative difference {d:.2g}): the final state was stored as an aux layer")
    # Residual streams grow with depth; a decrease is worth a look but not a verdict.
    fig["rms_increasing"] = all(fig["rms"][i] < fig["rms"][i + 1] for i in range(2))
    return fig, msgs


def read_jsonl(path, what):
    try:
        with open(path) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError) as e:
        raise CheckError(f"{what} {path}: {e}")


def _rid(row):
    rid = row.get("id", row.get("rid"))
    if rid is None:
        raise CheckError(f"a row has no id/rid: {sorted(row)}")
    return str(rid)


def run(model_dir, dumps_dir, ids_rows, greedy=None, samples=None, min_agreement=MIN_AGREEMENT,
        aux_layers=None, reference="auto", reference_max_bytes=2 << 30, reference_tokens=256):
    target = load_target(model_dir)
    head, norm = target["head"], target["norm"]
    rows = ids_rows[:samples] if samples else ids_rows
    if not rows:
        raise CheckError("no samples to check")
    greedy = greedy or {}
    checks = {k: {"ok": True, "messages": []} for k in ("tokens", "teacher", "final", "greedy", "aux")}
    if reference != "off":
        checks["reference"] = {"ok": True, "messages": []}
    per_sample = []
    pooled = {k: [0, 0] for k in ("next", "d_same", "d_next", "d_skip")}
    norm_rms = []
    for row in rows:
        rid = _rid(row)
        ids = [int(x) for x in row["input_ids"]]
        mask = [int(x) for x in row.get("loss_mask", [1] * len(ids))]
        path = os.path.join(dumps_dir, f"{rid}.safetensors")
        if not os.path.exists(path):
            checks["tokens"]["messages"].append(f"{rid}: no dump {path}")
            continue
        st = SafeTensors(path)
        fig = {"id": rid}
        fig["tokens"], msgs = check_tokens(rid, st, ids)
        checks["tokens"]["messages"] += msgs
        if "hidden_state" not in st.entries:
            continue
        final = st.array("hidden_state")
        final = final.reshape(-1, final.shape[-1])  # [T, H]; a [1, T, H] dump reads the same
        n = min(len(final), len(ids))
        if n:
            pred = argmax_logits(final[:n], head)
            counts = teacher_counts(pred, ids[:n], mask[:n])
            for k, (m, t) in counts.items():
                pooled[k] = [pooled[k][0] + m, pooled[k][1] + t]
            fig["teacher"] = {k: (m / t if t else None) for k, (m, t) in counts.items()}
            fig["teacher"].update(positions=counts["next"][1], distinct_positions=counts["d_next"][1])
        fig["final_norm_rms"], msgs = check_final_norm(rid, final, norm)
        norm_rms += [] if fig["final_norm_rms"] is None else [fig["final_norm_rms"]]
        checks["final"]["messages"] += msgs
        if rid in greedy and len(final):
            fig["greedy"], msgs = check_greedy(rid, final[-1], head, int(greedy[rid]))
            checks["greedy"]["messages"] += msgs
        if "aux_hidden_state" in st.entries:
            aux = st.array("aux_hidden_state")
            aux = aux.reshape(-1, aux.shape[-1])
            fig["aux"], msgs = check_aux(rid, aux, final)
            checks["aux"]["messages"] += msgs
            if reference != "off" and "figures" not in checks["reference"] and not msgs:
                layers = aux_layers
                if layers is None and "aux_layers" in st.meta:
                    layers = json.loads(st.meta["aux_layers"])
                r_fig, msgs = reference_check(target, rid, ids, aux, final, layers, reference_max_bytes, reference_tokens)
                checks["reference"]["figures"] = r_fig
                checks["reference"]["messages"] += msgs
                if reference == "on" and "skipped" in r_fig:
                    checks["reference"]["messages"].append(f"reference forward asked for but skipped: {r_fig['skipped']}")
        per_sample.append(fig)

    rate = {k: (m / t if t else None) for k, (m, t) in pooled.items()}
    teacher = checks["teacher"]
    teacher["figures"] = {"agreement_next": rate["next"], "positions": pooled["next"][1], "min_agreement": min_agreement,
                          "distinct_positions": pooled["d_next"][1], "distinct_same": rate["d_same"],
                          "distinct_next": rate["d_next"], "distinct_skip": rate["d_skip"]}
    if pooled["next"][1] == 0:
        teacher["messages"].append("no assistant-span positions to check (every loss_mask is 0)")
    elif rate["next"] < min_agreement:
        teacher["messages"].append(
            f"the final states through {target['head_name']} predict the next assistant token at rate {rate['next']:.3f} "
            f"< {min_agreement} over {pooled['next'][1]} positions: the states are not this target's for these tokens")
    for k, says in (("d_same", "the token at its own position: the states sit one token later than the ids (or the ids one earlier)"),
                    ("d_skip", "the token two ahead: the states sit one token earlier than the ids (or the ids one later)")):
        if pooled["d_next"][1] and rate[k] > 0 and rate[k] >= rate["d_next"]:
            teacher["messages"].append(f"the states predict {says} (rate {rate[k]:.3f} vs next-token rate {rate['d_next']:.3f} "
                                       f"over {pooled['d_next'][1]} positions whose three candidate tokens differ)")
    checks["final"]["figures"] = {"norm_rms_median": float(np.median(norm_rms)) if norm_rms else None,
                                  "norm_weight": target["norm_name"], "tolerance": NORM_RMS_TOL}
    if target["norm_name"] is None:
        checks["final"]["figures"]["skipped"] = "no final norm weight found in the weight map"
    g = [s["greedy"] for s in per_sample if "greedy" in s]
    checks["greedy"]["figures"] = {"checked": len(g), "exact": sum(1 for x in g if x["expected"] == x["predicted"]),
                                   "within_bf16": sum(1 for x in g if x.get("within_bf16"))}
    for c in checks.values():
        c["ok"] = not c["messages"]
    ok = all(c["ok"] for c in checks.values())
    return {"ok": ok, "samples": len(rows), "checks": checks, "per_sample": per_sample,
            "messages": [m for c in checks.values() for m in c["messages"]]}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m aerie_hs.selfcheck", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="target model directory (config.json, safetensors + index)")
    ap.add_argument("--dumps", required=True, help="directory of <id>.safetensors dumps")
    ap.add_argument("--ids", required=True, help="jsonl: {id, input_ids, loss_mask} per sample, in run order")
    ap.add_argument("--greedy", help="jsonl: {id, greedy_next}: the server's temperature-0 next token after each full prompt")
    ap.add_argument("--samples", type=int, help="check only the first N samples of --ids")
    ap.add_argument("--min-agreement", type=float, default=MIN_AGREEMENT)
    ap.add_argument("--aux-layers", help="JSON list of the SGLang capture ids, the draft ids + 1 (default: the dumps' metadata, else SGLang's default)")
    ap.add_argument("--reference", choices=["auto", "on", "off"], default="auto",
                    help="reference forward with transformers for small targets (auto: when torch is here and the weights fit)")
    ap.add_argument("--reference-max-bytes", type=int, default=2 << 30)
    args = ap.parse_args(argv)
    try:
        rows = read_jsonl(args.ids, "--ids")
        greedy = None
        if args.greedy:
            greedy = {_rid(r): int(r.get("greedy_next", r.get("token"))) for r in read_jsonl(args.greedy, "--greedy")}
        verdict = run(args.model, args.dumps, rows, greedy=greedy, samples=args.samples, min_agreement=args.min_agreement,
                      aux_layers=json.loads(args.aux_layers) if args.aux_layers else None, reference=args.reference,
                      reference_max_bytes=args.reference_max_bytes)
    except CheckError as e:
        print(json.dumps({"ok": False, "error": str(e), "messages": [str(e)]}))
        return 2
    print(json.dumps(verdict, default=lambda x: None if isinstance(x, float) and math.isnan(x) else str(x)))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
