#!/usr/bin/env python3
"""aerie's extraction chain on real tensors, up to the files SpecForge trains on.

A tiny transformers Llama (make_tiny_target.py) stands in for the server's model; the states
come from aerie's own capture code (py/aerie_hs/capture.py: capture_from_hf on the HF model's
layers, at the SGLang capture ids for the draft config's layer ids), written as dumps through
the CaptureBuffer the server hook uses, fed in prefill chunks so the stitching runs too.
scripts/real/hs_chain.sh drives the phases and the SpecForge runs after them.

  hs_chain.py prepare ROOT   target, greedy self-generated chats, ids.jsonl (aerie_hs.tokens)
  hs_chain.py capture ROOT   dumps/true, dumps/layer_off, ids_shifted.jsonl, greedy.jsonl
  hs_chain.py inspect ROOT FEATURES CAP   torch.load of the converted files against the dumps

The assistant turns are the tiny model's own greedy continuations, so on the true states the
teacher-forced argmax reproduces them: the self-check's agreement then means something.
"""
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "py"))

from aerie_hs.capture import (CaptureBuffer, capture_from_hf, sglang_capture_ids,  # noqa: E402
                              specforge_default_aux_layers)

SYSTEM = "You are a helpful assistant."
WORDS = ("the model reads each token and writes the next one until the answer ends with a short "
         "summary of what it said about water light food music numbers animals school").split()
CHATS = 24
NEW_TOKENS = 32
CHUNK = 40  # prefill chunk the capture is fed in, like SGLang's --chunked-prefill-size on a long prompt


def sh(argv, **kw):
    print("+", " ".join(argv), flush=True)
    return subprocess.run(argv, check=True, **kw)


def load(target):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(min(8, os.cpu_count() or 1))
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    # float32, so the teacher-forced argmax is the generated token by construction; the dump
    # rounds to bf16 as the server's does.
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).to(dev).eval()
    return AutoTokenizer.from_pretrained(target), model, dev


def greedy(model, dev, ids, n, stop):
    import torch

    with torch.no_grad():
        out = model.generate(torch.tensor([ids], device=dev), max_new_tokens=n, do_sample=False,
                             eos_token_id=stop, pad_token_id=stop)
    gen = out[0, len(ids):].tolist()
    return gen[:gen.index(stop)] if stop in gen else gen


def round_trip(tok, gen):
    """The longest prefix of the greedy tokens that the chat text gives back as the same tokens.

    A byte-level BPE emits pieces of UTF-8 characters, which decode to U+FFFD and re-tokenize as
    other ids; SpecForge's preprocessing re-tokenizes the text, so only a prefix that survives
    the round trip is still the model's own greedy output once it is in ids.jsonl.
    """
    for k in range(len(gen), 0, -1):
        text = tok.decode(gen[:k])
        if text == text.strip() and "\ufffd" not in text and tok.encode(text, add_special_tokens=False) == gen[:k]:
            return gen[:k], text
    return [], ""


def prepare(root):
    target = os.path.join(root, "target")
    sh([sys.executable, os.path.join(HERE, "make_tiny_target.py"), target,
        "--draft-config", os.path.join(root, "draft-config.json")])
    import torch
    from safetensors.torch import load_file, save_file

    # At init scale (std 0.02) the tiny model's greedy text collapses onto one or two tokens,
    # which no alignment check can tell apart; ten times larger embeddings keep the current token
    # in the residual stream (test/real-cpu/selfcheck.test.ts measured 0 repeats in 32 tokens).
    p = os.path.join(target, "model.safetensors")
    w = load_file(p)
    w["model.embed_tokens.weight"] = (w["model.embed_tokens.weight"].float() * 10).to(torch.bfloat16)
    save_file(w, p, metadata={"format": "pt"})

    tok, model, dev = load(target)
    eot = tok.convert_tokens_to_ids("<|eot_id|>")
    convs, stats = [], {"kept": 0, "dropped_repetitive": 0, "turns": 0}
    k = 0
    while len(convs) < CHATS:
        k += 1
        msgs = [{"role": "system", "content": SYSTEM}]
        ok = True
        for turn in range(1 if k % 3 else 2):  # every third chat has two turns
            rng = random.Random(k * 10 + turn)  # distinct prompts: a fixed cycle repeats after a few chats
            user = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
            msgs.append({"role": "user", "content": user})
            prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False)
            prompt = list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)
            gen, text = round_trip(tok, greedy(model, dev, prompt, NEW_TOKENS, eot))
            # a fixed point (the same token over and over) fits every alignment alike
            if sum(a == b for a, b in zip(gen, gen[1:])) > 4 or len(gen) < 8:
                ok = False
                break
            msgs.append({"role": "assistant", "content": text})
        if not ok:
            stats["dropped_repetitive"] += 1
            continue
        stats["turns"] += (len(msgs) - 1) // 2
        convs.append({"id": f"s{len(convs):03d}", "conversations": msgs})
    stats["kept"] = len(convs)
    with open(os.path.join(root, "conversations.jsonl"), "w") as fh:
        fh.writelines(json.dumps(c) + "\n" for c in convs)
    print(json.dumps({"prepare": stats}))


def capture(root):
    import torch

    target = os.path.join(root, "target")
    tok, model, dev = load(target)
    L = model.config.num_hidden_layers
    H = model.config.hidden_size
    with open(os.path.join(root, "draft-config.json")) as fh:
        draft = json.load(fh)
    draft_ids = (draft.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or specforge_default_aux_layers(L)
    cap_ids = sglang_capture_ids(draft_ids, L)
    rows = [json.loads(x) for x in open(os.path.join(root, "ids.jsonl")) if x.strip()]
    bad = [r for r in rows if "error" in r]
    if bad:
        raise SystemExit(f"aerie_hs.tokens refused samples: {bad[:3]}")
    variants = {"true": cap_ids, "layer_off": [c + 1 for c in cap_ids]}  # every capture point one layer late
    bufs = {}
    for v in variants:
        d = os.path.join(root, "dumps", v)
        os.makedirs(d, exist_ok=True)
        # The metadata names the configured capture ids, as the hook's buffer does
        # (py/aerie_hs/sglang_hook.py hands CaptureBuffer its capture ids), whatever was taken.
        bufs[v] = CaptureBuffer(d, cap_ids, H, tp_rank=0)
    second_rank = CaptureBuffer(os.path.join(root, "dumps", "true"), cap_ids, H, tp_rank=1)
    greedy_rows, shifted, written = [], [], {v: 0 for v in variants}
    for r in rows:
        ids = r["input_ids"]
        for v, c in variants.items():
            aux, fin = capture_from_hf(model, torch.tensor(ids, device=dev), c)
            assert aux.shape == (len(ids), 3 * H) and fin.shape == (len(ids), H), (aux.shape, fin.shape)
            path = None
            for at in range(0, len(ids), CHUNK):
                assert path is None, "a dump was written before its last chunk"
                path = bufs[v].add(r["id"], ids, at, aux[at:at + CHUNK], fin[at:at + CHUNK])
                if v == "true":
                    assert second_rank.add(r["id"], ids, at, aux[at:at + CHUNK], fin[at:at + CHUNK]) is None
            assert path and os.path.exists(path), f"{r['id']}: no dump after its last chunk"
            written[v] += 1
        with torch.no_grad():
            g = int(model(input_ids=torch.tensor([ids], device=dev)).logits[0, -1].argmax())
        greedy_rows.append({"id": r["id"], "greedy_next": g})
        # the ids one token ahead of the states (as if the server had prefilled a stray token first)
        shifted.append({"id": r["id"], "input_ids": ids[1:] + ids[-1:], "loss_mask": r["loss_mask"][1:] + [0]})
    for name, data in (("greedy.jsonl", greedy_rows), ("ids_shifted.jsonl", shifted)):
        with open(os.path.join(root, name), "w") as fh:
            fh.writelines(json.dumps(x) + "\n" for x in data)
    left = [f for f in os.listdir(os.path.join(root, "dumps", "true")) if f.endswith(".tmp")]
    print(json.dumps({"capture": {"L": L, "H": H, "draft_layer_ids": draft_ids, "sglang_capture_ids": cap_ids,
                                  "layer_off_capture_ids": variants["layer_off"], "chunk": CHUNK, "written": written,
                                  "tokens": [len(r["input_ids"]) for r in rows],
                                  "loss_tokens": [sum(r["loss_mask"]) for r in rows], "tmp_left": left,
                                  "device": dev}}))


def inspect(root, features, cap):
    """torch.load (weights_only) every converted file and compare it with its dump and ids."""
    import torch
    from safetensors.torch import load_file

    rows = {r["id"]: r for r in (json.loads(x) for x in open(os.path.join(root, "ids.jsonl")) if x.strip())}
    index = [json.loads(x) for x in open(os.path.join(features, "index.jsonl")) if x.strip()]
    checked, first = 0, None
    for e in index:
        i, sid = e["i"], e["id"]
        g = i // 2000 * 2000
        path = os.path.join(features, f"rows_{g}-{g + 2000}", f"data_{i}.ckpt")
        rec = torch.load(path, weights_only=True)
        dump = load_file(os.path.join(root, "dumps", "true", sid + ".safetensors"))
        T = len(rows[sid]["input_ids"])
        assert list(rec) == ["input_ids", "loss_mask", "aux_hidden_state", "hidden_state"], list(rec)
        assert rec["input_ids"].dtype == torch.int64 and rec["input_ids"].tolist() == rows[sid]["input_ids"]
        assert rec["loss_mask"].dtype == torch.int64 and rec["loss_mask"].tolist() == rows[sid]["loss_mask"]
        for k in ("aux_hidden_state", "hidden_state"):
            assert rec[k].dtype == torch.bfloat16 and rec[k].shape[:2] == (1, T), (k, rec[k].shape)
            assert torch.equal(rec[k][0], dump[k]), f"{sid}: {k} differs from its dump"
        if first is None:
            first = {k: f"{v.dtype} {list(v.shape)}" for k, v in rec.items()}
        checked += 1
    summary = {"files": checked, "index_rows": len(index), "data_0": first}
    with open(os.path.join(cap, "converted-check.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print(json.dumps({"inspect": summary}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    {"prepare": lambda: prepare(sys.argv[2]), "capture": lambda: capture(sys.argv[2]),
     "inspect": lambda: inspect(*sys.argv[2:5])}[cmd]()
