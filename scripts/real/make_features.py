#!/usr/bin/env python3
"""Write SpecForge offline feature files from a real forward pass of a (tiny) target.

Layout and dtypes follow SpecForge's offline training contract, as its own
scripts/prepare_hidden_states.py writes them:
  OUT/rows_{g}-{g+G}/data_{i}.ckpt   (SpecForge@a6b6b023:scripts/prepare_hidden_states.py:592-594)
  torch.save({input_ids int64[T], loss_mask int64[T], hidden_state [1,T,H], aux_hidden_state [1,T,3H]})
hidden_state is the final post-norm hidden state (the trainer puts it through the frozen
target lm_head for the teacher); aux_hidden_state concatenates the outputs of the layers
SpecForge captures by default, [1, L/2-1, L-4] (SpecForge@a6b6b023:specforge/algorithms/model_providers.py:204).
ids and mask are built the way SpecForge's parser does: the chat template renders the text,
tokenized with add_special_tokens=False; loss_mask=1 from after the assistant header through
the end-of-turn token (SpecForge@a6b6b023:specforge/data/parse.py:165-185,271-307).

Like prepare_hidden_states.py, it also writes OUT/vocab_mapping/vocab_mapping.pt
({d2t int64[Vd] as offsets used[i]-i, t2d bool[V]}: the Vd most frequent loss-masked ids,
SpecForge@a6b6b023:scripts/prepare_hidden_states.py:229-239,
specforge/data/preprocessing.py:720-766), the file aerie passes as model.vocab_mapping_path.

The same chats can be written as a SpecForge conversations jsonl (--conversations): v0.2's
scripts/train_eagle3.py requires --train-data-path even when training offline (it builds
the vocab mapping from it, SpecForge@73e6f808:scripts/train_eagle3.py:96,386-406).

Usage: make_features.py TARGET_DIR OUT_DIR [--samples N] [--group-size G] [--max-length T] [--conversations PATH]
"""
import argparse
import json
import os
import random
import re
from collections import Counter

ASSISTANT_HEADER = "<|start_header_id|>assistant<|end_header_id|>\n\n"
END_OF_TURN = "<|eot_id|>"
# SpecForge's llama3 template injects its long default system prompt when a chat has none
# (SpecForge@a6b6b023:specforge/data/template.py:93-99). Every chat here brings a short one,
# which keeps each file small.
SYSTEM = "You are a helpful assistant."

TOPICS = ["water", "school", "light", "food", "the earth", "a house", "music", "numbers", "animals", "a picture"]
ASKS = ["What is {t}?", "Tell me about {t}.", "Why does {t} matter?", "How do I study {t}?", "Explain {t} in two words."]
REPLIES = [
    "Sure. {t} is a good thing to look at, and many people find it important.",
    "Here is a short answer: {t} is part of life for most of us.",
    "Good question. Think of {t} as something we use every day.",
    "I think {t} is worth a study, so take time with it.",
]


def chats(n, seed):
    rng = random.Random(seed)
    for i in range(n):
        t = rng.choice(TOPICS)
        turns = [{"role": "system", "content": SYSTEM}]
        # The first chat is a single turn, so data_0.ckpt stays small enough to keep as a fixture.
        for _ in range(1 if i == 0 else rng.randint(1, 2)):
            turns.append({"role": "user", "content": rng.choice(ASKS).format(t=t)})
            turns.append({"role": "assistant", "content": rng.choice(REPLIES).format(t=t)})
        yield turns


def ids_and_mask(tokenizer, messages, max_length):
    import torch

    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    ids = tokenizer(text, add_special_tokens=False, truncation=True, max_length=max_length)["input_ids"]
    mask = [0] * len(ids)
    pattern = re.escape(ASSISTANT_HEADER) + r"([\s\S]*?(?:" + re.escape(END_OF_TURN) + r"|$))"
    for m in re.finditer(pattern, text):
        start = len(tokenizer.encode(text[: m.start(1)], add_special_tokens=False))
        end = len(tokenizer.encode(text[: m.end(1)], add_special_tokens=False))
        for k in range(min(start, len(ids)), min(end, len(ids))):
            mask[k] = 1
    return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)


def write_vocab_mapping(out, counts, draft_vocab, target_vocab):
    import torch

    # Ids never seen in a loss span fill the draft vocabulary up to its size, lowest first.
    ranked = sorted(counts, key=lambda t: (-counts[t], t))[:draft_vocab]
    for t in range(target_vocab):
        if len(ranked) >= draft_vocab:
            break
        if t not in counts:
            ranked.append(t)
    used = sorted(ranked)
    d2t = torch.tensor([tid - i for i, tid in enumerate(used)], dtype=torch.long)
    t2d = torch.zeros(target_vocab, dtype=torch.bool)
    t2d[used] = True
    d = os.path.join(out, "vocab_mapping")
    os.makedirs(d, exist_ok=True)
    torch.save({"d2t": d2t, "t2d": t2d}, os.path.join(d, "vocab_mapping.pt"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("out")
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--group-size", type=int, default=2000)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--draft-vocab-size", type=int, default=512)
    ap.add_argument("--conversations", help="also write the chats as SpecForge conversations jsonl here")
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.target)
    model = AutoModelForCausalLM.from_pretrained(args.target, dtype=torch.bfloat16).eval()
    L = model.config.num_hidden_layers
    aux_layers = [1, L // 2 - 1, L - 4]
    captured = {}

    def keep(idx):
        def hook(_mod, _inp, out):
            captured[idx] = out[0] if isinstance(out, tuple) else out
        return hook

    for idx in aux_layers:
        model.model.layers[idx].register_forward_hook(keep(idx))

    all_chats = list(chats(args.samples, args.seed))
    if args.conversations:
        with open(args.conversations, "w") as fh:
            for i, messages in enumerate(all_chats):
                fh.write(json.dumps({"id": f"row-{i}", "conversations": messages}) + "\n")
    counts = Counter()
    written = []
    with torch.no_grad():
        for i, messages in enumerate(all_chats):
            input_ids, loss_mask = ids_and_mask(tokenizer, messages, args.max_length)
            captured.clear()
            final = model.model(input_ids=input_ids.unsqueeze(0)).last_hidden_state  # post-norm
            aux = torch.cat([captured[k] for k in aux_layers], dim=-1)
            group = (i // args.group_size) * args.group_size
            d = os.path.join(args.out, f"rows_{group}-{group + args.group_size}")
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, f"data_{i}.ckpt")
            torch.save(
                {
                    "input_ids": input_ids,
                    "loss_mask": loss_mask,
                    "hidden_state": final.to(torch.bfloat16).contiguous(),
                    "aux_hidden_state": aux.to(torch.bfloat16).contiguous(),
                },
                path,
            )
            counts.update(input_ids[loss_mask == 1].tolist())
            written.append({"file": path, "tokens": int(input_ids.numel()), "loss_tokens": int(loss_mask.sum())})
    write_vocab_mapping(args.out, counts, args.draft_vocab_size, model.config.vocab_size)
    print(json.dumps({"files": len(written), "aux_layers": aux_layers, "tokens": [w["tokens"] for w in written]}))


if __name__ == "__main__":
    main()
