#!/usr/bin/env python3
"""Build a tiny random-weight Llama target (and an EAGLE-3 draft config for it) on local disk.

Real SpecForge needs a real target directory to train against: its config, weights with a
safetensors index (the TargetHead finds lm_head through the index), untied embeddings (the
drafter copies the embedding and the lm_head is read separately) and a tokenizer with a chat
template. Nothing here downloads anything: the tokenizer is trained locally on a few
generated sentences, so the same command works on a machine with no network.

Usage: make_tiny_target.py OUT_DIR [--draft-config PATH] [--seed N]
"""
import argparse
import json
import os
import random

LAYERS = 8
VOCAB = 1024
HIDDEN = 256
DRAFT_VOCAB = 512  # smaller than VOCAB, so SpecForge derives a d2t/t2d vocab mapping

SPECIALS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|pad|>",
]

# Llama-3's chat template shape: what SpecForge's "llama3" template (assistant header
# "<|start_header_id|>assistant<|end_header_id|>\n\n", end of turn "<|eot_id|>") expects.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

WORDS = (
    "the a an of to and in is it that for on with as was at by be this are from or have not but what all "
    "were when we there can which one their said if do will each about how up out them then she many some "
    "so these would other into has more her two like him see time could no make than first been its who now "
    "people my made over did down only way find use may water long little very after words called just where "
    "most know get through back much before go good new write our used me man too any day same right look "
    "think also around another came come work three word must because does part even place well such here "
    "take why things help put years different away again off went old number great tell men say small every "
    "found still between name should home big give air line set own under read last never us left end along "
    "while might next sound below saw something thought both few those always looked show large often together "
    "asked house world going want school important until form food keep children feet land side without boy "
    "once animals life enough took sometimes four head above kind began almost live page got earth need far "
    "hand high year mother light parts country father let night following picture being study second eyes soon "
    "helpful assistant answer question explain please thanks sure model train draft token speculative decode"
).split()


def corpus(rng, n):
    for _ in range(n):
        yield " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 24))) + rng.choice([".", "?", "!", ""])


def build_tokenizer(out, rng):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus(rng, 4000)), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|pad|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    # transformers 5 records its own class name (TokenizersBackend), which 4.x (SpecForge
    # v0.2.0 pins transformers 4.57.1) cannot load; PreTrainedTokenizerFast loads in both.
    cfg_path = os.path.join(out, "tokenizer_config.json")
    with open(cfg_path) as fh:
        cfg = json.load(fh)
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    with open(cfg_path, "w") as fh:
        json.dump(cfg, fh, indent=2)
    return fast


def build_model(out, tokenizer, seed):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=4 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    write_index(out)
    return cfg


def write_index(out):
    # save_pretrained writes no index for a single shard; SpecForge's target head locates
    # lm_head.weight through model.safetensors.index.json, so write the one-shard index.
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


def write_draft_config(path, cfg):
    draft = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "pad_token_id": cfg.pad_token_id,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "intermediate_size": 4 * HIDDEN,
        "initializer_range": 0.02,
        "max_position_embeddings": 2048,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 1,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
    }
    with open(path, "w") as fh:
        json.dump(draft, fh, indent=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--draft-config", help="where to write the EAGLE-3 draft config (default OUT/../draft-config.json)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer(args.out, rng)
    cfg = build_model(args.out, tokenizer, args.seed)
    draft_path = args.draft_config or os.path.join(os.path.dirname(os.path.abspath(args.out)), "draft-config.json")
    write_draft_config(draft_path, cfg)
    print(json.dumps({"target": os.path.abspath(args.out), "draft_config": draft_path, "layers": LAYERS, "vocab": VOCAB, "hidden": HIDDEN}))


if __name__ == "__main__":
    main()
