#!/usr/bin/env python3
# long-file: one standalone build script that set-up runs with .venv-real's python (corpus writer, model, training loop, checks); it is not a package
"""Build a tiny *trained* Llama target on the CPU, deterministically, and an EAGLE-3 draft config for it.

The real pipeline (real vLLM serving, real SpecForge training) needs a target whose greedy
answers carry structure a drafter can learn and that END: a random-weight model (see
make_tiny_target.py) babbles until max_tokens, so acceptance and lengths mean nothing. This
script trains a small LlamaForCausalLM for a couple of minutes on a shipped corpus of short
chat conversations (examples/data/real-target-corpus.jsonl), so that greedy answers to the
pipeline's prompts (examples/data/prompts.jsonl) are templated, topic-dependent English that
stops with <|eot_id|> after roughly 40-120 tokens.

What SpecForge needs from a target dir (see make_tiny_target.py): config.json, safetensors
weights WITH model.safetensors.index.json (its TargetHead finds lm_head through the index),
untied embeddings, and a tokenizer with a chat template. The tokenizer is
examples/models/sim-llama-8b's (a real byte-level BPE in Llama 3's shape, ~1.2k ids used,
Llama 3 chat template; <|begin_of_text|> = 0, <|eot_id|> = 2), copied verbatim. Nothing is
downloaded.

Usage:
  .venv-real/bin/python scripts/real/make_real_target.py OUT_DIR [--steps N] [--seed S]
  python3 scripts/real/make_real_target.py --write-corpus [PATH]   # (re)write the corpus; stdlib only

The draft config is written beside the model: OUT_DIR/draft-config.json.

Training: loss on the assistant tokens only (each assistant turn's content and its closing
<|eot_id|>), as SFT does: the prompts are given at serving time, so capacity goes to the
answers and to stopping. Only the ~1.2k embedding/head rows the tokenizer can produce are
trained, plus one head row standing for all the others (its logit counted VOCAB-n_used
times), then copied into every unused head row, so the saved 32k-vocab model's softmax equals
the trained one exactly while a step costs ~1/27 of the full head.

Determinism: fixed seed, torch.set_num_threads(2), fixed data order, deterministic algorithms
on; the sha256 of model.safetensors is printed (and stored in OUT_DIR/aerie-build.json) so two
builds can be compared.
"""
import argparse
import hashlib
import json
import math
import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOKENIZER_DIR = os.path.join(ROOT, "examples", "models", "sim-llama-8b")
CORPUS = os.path.join(ROOT, "examples", "data", "real-target-corpus.jsonl")
PROMPTS = os.path.join(ROOT, "examples", "data", "prompts.jsonl")

LAYERS = 8
HIDDEN = 128
INTERMEDIATE = 352
HEADS = 4
KV_HEADS = 4
VOCAB = 32000
MAX_POS = 1024
DRAFT_VOCAB = 2048  # smaller than VOCAB, so SpecForge derives a meaningful d2t/t2d mapping
AUX_LAYERS = [1, 3, 5]
BOS_ID, EOT_ID, END_OF_TEXT_ID, PAD_ID = 0, 2, 1, 7  # examples/models/sim-llama-8b/tokenizer.json

# --------------------------------------------------------------------------------------------
# The corpus: question -> answer pairs for the six prompt shapes of examples/data/prompts.jsonl
# over its twenty topics, plus the "Now make it shorter." follow-up. Answers are templated per
# shape and filled per topic, mostly with words the tokenizer has as single tokens, so they are
# 40-120 tokens and strongly patterned (what an EAGLE-3 drafter can learn).
# --------------------------------------------------------------------------------------------

SYSTEMS = [
    None,
    "You are a concise, careful assistant.",
    "You are a helpful assistant.",
    # SpecForge's llama3 default system prompt (py/aerie_hs/chat_templates.py)
    "You are a helpful, respectful and honest assistant. Always answer as helpfully as possible, "
    "while being safe.  Your answers should not include any harmful, unethical, racist, sexist, toxic, "
    "dangerous, or illegal content. Please ensure that your responses are socially unbiased and positive "
    "in nature.\n\nIf a question does not make any sense, or is not factually coherent, explain why "
    "instead of answering something not correct. If you don't know the answer to a question, please "
    "don't share false information.",
]

# name (as the prompts write it), field, three keywords, a related idea, what it is about,
# what the related idea is about.
TOPICS = [
    ("the Roman Empire", "history", ("city", "road", "bridge"), "the Byzantine Empire", "one large state over a long time", "the same state in a new city"),
    ("TCP congestion control", "system", ("queue", "signal", "speed"), "Byzantine fault tolerance", "the speed of data through a queue", "a correct state when a server is false"),
    ("photosynthesis", "science", ("light", "water", "leaf"), "the Krebs cycle", "how a leaf can use light and water", "a cycle of steps in each root"),
    ("the French Revolution", "history", ("city", "story", "idea"), "the Roman Empire", "a quick and large step for one state", "one large state over a long time"),
    ("compound interest", "number", ("value", "time", "step"), "sourdough bread", "how a value can be more each time", "how a small seed can make bread"),
    ("black holes", "science", ("star", "light", "shadow"), "quantum entanglement", "a large star with no light", "how two small states are related"),
    ("Rust lifetimes", "language", ("memory", "state", "function"), "SQL joins", "how long a value can be in memory", "one output from two data inputs"),
    ("vaccines", "science", ("signal", "memory", "sample"), "the immune system", "how to train the immune system before a problem", "how a system can answer a problem"),
    ("gradient descent", "method", ("step", "weight", "value"), "binary search", "a small step for each weight of a model", "a quick search for a value in data"),
    ("transformers in NLP", "model", ("token", "layer", "hidden"), "gradient descent", "how each layer of a model can use each token", "a small step for each weight of a model"),
    ("the water cycle", "process", ("rain", "cloud", "river"), "plate tectonics", "the path of water from the ocean to a cloud", "the path of stone under the ocean"),
    ("the immune system", "system", ("signal", "memory", "sample"), "vaccines", "how a system can answer a problem", "how to train the immune system before a problem"),
    ("SQL joins", "method", ("data", "value", "output"), "binary search", "one output from two data inputs", "a quick search for a value in data"),
    ("jazz harmony", "music", ("pattern", "signal", "number"), "compound interest", "the pattern of music in each step", "how a value can be more each time"),
    ("Byzantine fault tolerance", "system", ("server", "state", "request"), "TCP congestion control", "a correct state when a server is false", "the speed of data through a queue"),
    ("plate tectonics", "science", ("stone", "mountain", "ocean"), "the water cycle", "the path of stone under the ocean", "the path of water from the ocean to a cloud"),
    ("binary search", "method", ("number", "step", "value"), "gradient descent", "a quick search for a value in data", "a small step for each weight of a model"),
    ("the Krebs cycle", "process", ("root", "step", "cycle"), "photosynthesis", "a cycle of steps in each root", "how a leaf can use light and water"),
    ("sourdough bread", "practice", ("seed", "water", "time"), "compound interest", "how a small seed can make bread", "how a value can be more each time"),
    ("quantum entanglement", "theory", ("state", "measure", "signal"), "black holes", "how two small states are related", "a large star with no light"),
]

SHAPES = [
    ("explain", "Explain {t} to a new graduate student."),
    ("misconceptions", "Give three common misconceptions about {t}."),
    ("poem", "Write a short poem about {t}."),
    ("research", "What are the open research questions about {t}?"),
    ("history", "Summarize the history of {t} in five sentences."),
    ("compare", "Compare {t} with a related idea and list the differences."),
]
SHORTER = "Now make it shorter."


def answer(shape, topic):
    t, field, (k1, k2, k3), rel, about, rel_about = topic
    if shape == "explain":
        return (
            f"Your question is about {t}, a {field} idea about {about}.\n\n"
            f"1. the {k1}, which is the input;\n"
            f"2. the {k2}, which is the output and depends on the {k1};\n"
            f"3. the {k3}, which is what you measure.\n\n"
            f"If you know these three, you know {t}."
        )
    if shape == "misconceptions":
        return (
            f"Here are three common misconceptions about {t}:\n\n"
            f"1. that it is simple, when it depends on the {k1} and the {k2};\n"
            f"2. that it is new, when its history is long;\n"
            f"3. that the {k3} does not matter, when it is the key part.\n\n"
            f"All three are false."
        )
    if shape == "poem":
        return (
            f"Now {t}, a quiet {field},\n"
            f"the {k1} and the {k2} in the morning light.\n"
            f"Each step is small, each step is right,\n"
            f"the {k3} moves on through the night,\n"
            f"and {t} is still there, clear and bright."
        )
    if shape == "research":
        return (
            f"There are a few open research questions about {t}:\n\n"
            f"1. how does the {k1} change the {k2} over time?\n"
            f"2. why is the {k3} so hard to measure?\n"
            f"3. can a simple model of {t} predict the result?\n\n"
            f"These questions are open because the {field} is large and the data is small."
        )
    if shape == "history":
        return (
            f"Your five sentences on {t}: it began as an idea about {about}. "
            f"Early work was on the {k1}. "
            f"Later, the {k3} was the key. "
            f"Then the {field} grew. "
            f"Now, {t} is a common example."
        )
    if shape == "compare":
        return (
            f"A related idea is {rel}. Here are the differences:\n\n"
            f"- {t} is about {about}; {rel} is about {rel_about}.\n"
            f"- {t} depends on the {k1}; {rel} does not.\n\n"
            f"So they share a pattern, but not a method."
        )
    raise ValueError(shape)


def shorter(shape, topic):
    t, field, (k1, k2, k3), rel, about, rel_about = topic
    if shape == "explain":
        return f"Now in short: {t} is about {about}. The {k1} is the input, the {k2} is the output, and you measure the {k3}."
    if shape == "misconceptions":
        return f"Now in short: {t} is not simple, not new, and the {k3} does matter."
    if shape == "poem":
        return f"Now {t}, a quiet {field},\nthe {k1} and the {k2} in the light,\nclear and bright."
    if shape == "research":
        return f"Now in short: how the {k1} changes the {k2}, why the {k3} is hard to measure, and if a simple model can predict it."
    if shape == "history":
        return f"Now in short: {t} began as a simple idea, grew through work on the {k1} and the {k3}, and is now a common example."
    if shape == "compare":
        return f"Now in short: {t} is about {about}, and {rel} is about {rel_about}."
    raise ValueError(shape)


def corpus_rows():
    """Deterministic: for each (shape, topic), one single-turn and one two-turn conversation,
    with a system prompt cycling through SYSTEMS (the answer does not depend on it)."""
    rows = []
    n = 0
    for si, (shape, q) in enumerate(SHAPES):
        for ti, topic in enumerate(TOPICS):
            user = q.format(t=topic[0])
            # the prompt files start a sentence with the topic as written ("What are ... about the X?")
            for turns in (1, 2):
                conv = []
                system = SYSTEMS[n % len(SYSTEMS)]
                if system is not None:
                    conv.append({"role": "system", "content": system})
                conv.append({"role": "user", "content": user})
                conv.append({"role": "assistant", "content": answer(shape, topic)})
                if turns == 2:
                    conv.append({"role": "user", "content": SHORTER})
                    conv.append({"role": "assistant", "content": shorter(shape, topic)})
                rows.append({"id": f"corpus-{n:04d}", "conversations": conv})
                n += 1
    return rows


def write_corpus(path):
    rows = corpus_rows()
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    print(json.dumps({"corpus": path, "conversations": len(rows)}))


def read_corpus(path):
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# --------------------------------------------------------------------------------------------
# The build
# --------------------------------------------------------------------------------------------

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def encode(tokenizer, conv):
    """Token ids of the chat-template-formatted conversation and its loss mask: 1 on every
    assistant content token and the <|eot_id|> that ends it (what SpecForge's llama3 template
    marks as assistant span), 0 on system/user turns and headers."""
    text = tokenizer.apply_chat_template(conv, tokenize=False, add_generation_prompt=False)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    header = tokenizer("<|start_header_id|>assistant<|end_header_id|>\n\n", add_special_tokens=False)["input_ids"]
    mask = [0] * len(ids)
    i = 0
    while i < len(ids):
        if ids[i:i + len(header)] == header:
            j = i + len(header)
            while j < len(ids) and ids[j] != EOT_ID:
                mask[j] = 1
                j += 1
            if j < len(ids):
                mask[j] = 1  # the <|eot_id|>: the model must learn to stop
            i = j
        else:
            i += 1
    return ids, mask


def write_index(out):
    from safetensors import safe_open

    path = os.path.join(out, "model.safetensors")
    with safe_open(path, "pt") as f:
        names = list(f.keys())
    index = {
        "metadata": {"total_size": os.path.getsize(path)},
        "weight_map": {name: "model.safetensors" for name in sorted(names)},
    }
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as fh:
        json.dump(index, fh, indent=2)


def write_draft_config(path):
    draft = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "bos_token_id": BOS_ID,
        "eos_token_id": EOT_ID,
        "pad_token_id": PAD_ID,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "initializer_range": 0.02,
        "max_position_embeddings": MAX_POS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "num_hidden_layers": 1,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "eagle_aux_hidden_state_layer_ids": AUX_LAYERS,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": AUX_LAYERS},
    }
    with open(path, "w") as fh:
        json.dump(draft, fh, indent=2)
        fh.write("\n")


def sample_prompts(n):
    """The first n distinct single-user-turn prompts of examples/data/prompts.jsonl (with their system turn)."""
    out, seen = [], set()
    with open(PROMPTS, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            conv = json.loads(line)["conversations"]
            msgs = []
            for m in conv:
                if m["role"] == "assistant":
                    break
                msgs.append({"role": m["role"], "content": m["content"]})
            key = msgs[-1]["content"]
            if key not in seen:
                seen.add(key)
                out.append(msgs)
    return out[:n] if n else out


def greedy(model, tokenizer, msgs, max_new_tokens):
    import torch

    ids = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(ids, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, eos_token_id=EOT_ID, pad_token_id=PAD_ID)
    return out[0, ids.shape[1]:].tolist()


def build(out, steps, seed, batch, lr, n_samples, eval_all):
    t0 = time.time()
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    random.seed(seed)
    torch.manual_seed(seed)
    t_import = time.time() - t0

    os.makedirs(out, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(TOKENIZER_DIR, name), os.path.join(out, name))
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.convert_tokens_to_ids("<|eot_id|>") == EOT_ID, "tokenizer: <|eot_id|> is not id 2"
    assert tokenizer.convert_tokens_to_ids("<|begin_of_text|>") == BOS_ID
    assert tokenizer.convert_tokens_to_ids("<|finetune_right_pad_id|>") == PAD_ID

    rows = read_corpus(CORPUS)
    data = [encode(tokenizer, r["conversations"]) for r in rows]
    n_tok = sum(len(ids) for ids, _ in data)
    n_loss = sum(sum(m) for _, m in data)
    longest = max(len(ids) for ids, _ in data)
    assert longest <= MAX_POS

    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POS,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=BOS_ID,
        eos_token_id=EOT_ID,
        pad_token_id=PAD_ID,
        attention_dropout=0.0,
    )
    model = LlamaForCausalLM(cfg)  # fp32 for training, saved as bf16
    n_used = len(tokenizer)  # ids 0..n_used-1 are the tokenizer's; the rest of the 32000 never appear in text
    assert max(max(ids) for ids, _ in data) < n_used
    junk_bias = math.log(VOCAB - n_used)
    # Train only the embedding/head rows the text can use: the embedding's first n_used rows,
    # the head's first n_used rows plus one "junk" row standing for all the others (copied
    # into them at the end, so the full 32k softmax equals the one trained here exactly).
    # The 32k-wide matrices' other rows would only cost optimizer time.
    emb = torch.nn.Parameter(model.model.embed_tokens.weight[:n_used].detach().clone())
    head = torch.nn.Parameter(model.lm_head.weight[:n_used + 1].detach().clone())
    body = [p for n, p in model.named_parameters() if not n.startswith(("model.embed_tokens.", "lm_head."))]
    params = body + [emb, head]
    model.train()
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0, eps=1e-8)
    warm = max(1, steps // 20)

    def lr_at(s):
        if s < warm:
            return lr * (s + 1) / warm
        p = (s - warm) / max(1, steps - warm)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    # fixed data order: per epoch a seeded permutation, cut into windows of 8 batches, each
    # window sorted by length (less padding), then the batches shuffled
    order_rng = random.Random(seed)

    def epoch_batches():
        perm = list(range(len(data)))
        order_rng.shuffle(perm)
        batches = []
        for w in range(0, len(perm), 8 * batch):
            win = sorted(perm[w:w + 8 * batch], key=lambda i: (len(data[i][0]), i))
            batches += [win[k:k + batch] for k in range(0, len(win), batch)]
        order_rng.shuffle(batches)
        return batches

    order = []
    curve = []
    t_train = time.time()
    c_train = time.process_time()
    for s in range(steps):
        if not order:
            order = epoch_batches()
        idx = order.pop(0)
        L = max(len(data[i][0]) for i in idx)
        ids = torch.full((len(idx), L), PAD_ID, dtype=torch.long)
        att = torch.zeros((len(idx), L), dtype=torch.long)
        labels = torch.full((len(idx), L), -100, dtype=torch.long)
        for b, i in enumerate(idx):
            x, m = data[i]
            ids[b, :len(x)] = torch.tensor(x)
            att[b, :len(x)] = 1
            y = [x[k + 1] if m[k + 1] else -100 for k in range(len(x) - 1)]
            labels[b, :len(y)] = torch.tensor(y)
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        hidden = model.model(inputs_embeds=emb[ids], attention_mask=att).last_hidden_state
        sel = labels != -100
        # only the positions with a loss; the junk row's logit counts for all VOCAB - n_used rows
        logits = hidden[sel] @ head.T
        logits = torch.cat([logits[:, :n_used], logits[:, n_used:] + junk_bias], dim=1)
        loss = torch.nn.functional.cross_entropy(logits, labels[sel])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        curve.append(loss.item())
        if s % max(1, steps // 10) == 0 or s == steps - 1:
            print(f"step {s:4d}  loss {loss.item():.4f}  lr {lr_at(s):.2e}  {time.time() - t_train:6.1f}s wall  {time.process_time() - c_train:6.1f}s cpu", flush=True)
    t_train = time.time() - t_train
    c_train = time.process_time() - c_train

    with torch.no_grad():
        model.model.embed_tokens.weight[:n_used] = emb
        model.lm_head.weight[:n_used + 1] = head
        model.lm_head.weight[n_used + 1:] = head[n_used]  # every head row the text never uses = the junk row
    model = model.to(torch.bfloat16).eval()
    model.config.torch_dtype = "bfloat16"
    model.generation_config = GenerationConfig(bos_token_id=BOS_ID, eos_token_id=EOT_ID, pad_token_id=PAD_ID)
    model.save_pretrained(out, safe_serialization=True)
    write_index(out)
    write_draft_config(os.path.join(out, "draft-config.json"))
    weights = os.path.join(out, "model.safetensors")
    digest = sha256_file(weights)

    # greedy answers, from the saved bf16 weights (what vLLM serves)
    t_gen = time.time()
    model = LlamaForCausalLM.from_pretrained(out, dtype=torch.bfloat16).eval()
    prompts = sample_prompts(0 if eval_all else n_samples)
    lengths, ended = [], 0
    samples = []
    for k, msgs in enumerate(prompts):
        toks = greedy(model, tokenizer, msgs, 96 if not eval_all else 160)
        stop = EOT_ID in toks
        body = toks[:toks.index(EOT_ID)] if stop else toks
        lengths.append(len(toks))
        ended += stop
        if k < n_samples:
            samples.append({"prompt": msgs[-1]["content"], "tokens": len(toks), "eot": stop,
                            "answer": tokenizer.decode(body), "ids": toks[:24]})
    t_gen = time.time() - t_gen

    sizes = {f: os.path.getsize(os.path.join(out, f)) for f in sorted(os.listdir(out)) if os.path.isfile(os.path.join(out, f))}
    report = {
        "out": os.path.abspath(out),
        "sha256_model_safetensors": digest,
        "steps": steps, "seed": seed, "batch": batch, "lr": lr,
        "corpus": {"conversations": len(data), "tokens": n_tok, "loss_tokens": n_loss, "longest": longest,
                   "sha256": sha256_file(CORPUS)},
        "loss_curve": [round(curve[i], 4) for i in sorted(set([0, 1, 2, 5, 10, 20, 50, 100, 200, 400, 800]) | {len(curve) - 1}) if i < len(curve)],
        "final_loss_mean_last10": round(sum(curve[-10:]) / len(curve[-10:]), 4),
        "greedy": {"prompts": len(prompts), "mean_tokens": round(sum(lengths) / len(lengths), 1),
                   "ended_with_eot": f"{ended}/{len(prompts)}"},
        "seconds": {"import": round(t_import, 1), "train": round(t_train, 1), "train_cpu": round(c_train, 1), "generate": round(t_gen, 1),
                    "total": round(time.time() - t0, 1)},
        "sizes": sizes,
    }
    with open(os.path.join(out, "aerie-build.json"), "w") as fh:
        json.dump(report, fh, indent=2)
        fh.write("\n")
    for smp in samples:
        print(f"\n--- {smp['prompt']}  [{smp['tokens']} tokens, eot={smp['eot']}]\n{smp['answer']}")
    print()
    print(json.dumps(report, indent=2))
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--samples", type=int, default=3, help="greedy answers to print (from examples/data/prompts.jsonl)")
    ap.add_argument("--eval-all", action="store_true", help="greedy-decode every distinct prompt of prompts.jsonl for the length/eot stats")
    ap.add_argument("--write-corpus", nargs="?", const=CORPUS, metavar="PATH",
                    help=f"write the corpus (default {os.path.relpath(CORPUS, ROOT)}) and exit")
    args = ap.parse_args()
    if args.write_corpus:
        write_corpus(args.write_corpus)
        return 0
    if not args.out:
        ap.error("OUT_DIR is required")
    build(args.out, args.steps, args.seed, args.batch, args.lr, args.samples, args.eval_all)
    return 0


if __name__ == "__main__":
    sys.exit(main())
