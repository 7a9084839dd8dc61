"""Build the simulator target's tokenizer (examples/models/sim-llama-8b), deterministically.

Run with a Python that has `tokenizers` and `transformers` (aerie's .venv-specforge):
  .venv-specforge/bin/python scripts/sim-model/build_tokenizer.py [--out DIR] [--check]

A byte-level BPE in the shape of Llama 3's tokenizer.json (its pre-tokenizer regex, byte-level
alphabet, `ignore_merges`, <|begin_of_text|> prepended by the post-processor), built locally,
nothing from a model hub. Every word aerie-sim generates (sim/sglang/text.ts VOCAB) is one token
in both forms, sentence-initial `word` and `Ġword`; so are the words of the demo's prompts and
of SpecForge's llama3 default system prompt, so that the demo's conversations stay short. Any
other text falls back to one token per byte.

Id layout (sim/sglang/tokenizer.ts relies on it; test/sim/sim-tokenizer.test.ts checks both agree):
  0..255    special tokens: 0 <|begin_of_text|>, 1 <|end_of_text|>, 2 <|eot_id|> (the target's
            EOS: config.json has no eos_token_id and SGLang's sim defaults to 2), 3
            <|start_header_id|>, 4 <|end_header_id|>, 5 <|eom_id|>, 6 <|python_tag|>, 7
            <|finetune_right_pad_id|>, 8.. <|reserved_special_token_N|>
  256..511  the byte-level alphabet, byte b at 256 + b
  512..     whitespace runs (ĊĊ, ...), then VOCAB's words (bare, Ġ) in VOCAB order, then the
            extra words (bare, Ġ) sorted
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(ROOT, "examples", "models", "sim-llama-8b")
VOCAB_SIZE_LIMIT = 32000  # the target's config.json vocab_size

# Llama 3's pre-tokenizer split (the "Split" regex of Meta-Llama-3's tokenizer.json).
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>"]
SPECIALS += [f"<|reserved_special_token_{i}|>" for i in range(256 - len(SPECIALS))]
WHITESPACE = ["ĊĊ", "ĊĊĊ", "ĠĠ", "ĠĠĠ", "ĠĠĠĠ", "ĉĉ"]
ROLES = ["system", "user", "assistant", "tool", "ipython"]

# Llama 3's template shape (as test/fixtures/real/specforge-pypi-0.2.0/tokenizer has it): BOS,
# then per message a header, the trimmed content and <|eot_id|>; the generation prompt opens an
# assistant header. SpecForge's llama3 registry entry expects exactly these strings
# (SpecForge@a6b6b023:specforge/data/template.py:92-100).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)


def bytes_to_unicode():
    """GPT-2's byte-level alphabet: printable bytes map to themselves, the rest above 255."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def sim_vocab():
    src = open(os.path.join(ROOT, "sim", "sglang", "text.ts"), encoding="utf-8").read()
    m = re.search(r"export const VOCAB: readonly string\[\] = \((.*?)\)\.split\(' '\);", src, re.S)
    if not m:
        sys.exit("build_tokenizer: cannot find VOCAB in sim/sglang/text.ts")
    words = "".join(re.findall(r"'([^']*)'", m.group(1))).split(" ")
    if len(set(words)) != len(words):
        sys.exit("build_tokenizer: VOCAB in sim/sglang/text.ts repeats a word")
    return words


def extra_words(vocab):
    texts = []
    with open(os.path.join(ROOT, "examples", "data", "prompts.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                for turn in json.loads(line).get("conversations", []):
                    texts.append(turn.get("content") or turn.get("value") or "")
    sys.path.insert(0, os.path.join(ROOT, "py"))
    from aerie_hs.tokens import TEMPLATES  # SpecForge's llama3 default system prompt, as aerie carries it

    texts.append(TEMPLATES["llama3"].system_prompt)
    found = set(re.findall(r"[A-Za-z]+", " ".join(texts))) | set(ROLES)
    return sorted(found - set(vocab))


def build_vocab():
    b2u = bytes_to_unicode()
    vocab = {}
    for i, s in enumerate(SPECIALS):
        vocab[s] = i
    for b in range(256):
        vocab[b2u[b]] = 256 + b
    for w in WHITESPACE:
        vocab.setdefault(w, len(vocab))
    words = sim_vocab()
    for w in words + extra_words(words):
        for form in (w, "Ġ" + w):
            if len(form) > 1:  # single letters are already byte tokens
                vocab.setdefault(form, len(vocab))
    if len(vocab) > VOCAB_SIZE_LIMIT:
        sys.exit(f"build_tokenizer: {len(vocab)} tokens > vocab_size {VOCAB_SIZE_LIMIT}")
    return vocab


def build(out):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = build_vocab()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], ignore_merges=True, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", 0)]),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    os.makedirs(out, exist_ok=True)
    tok_json = json.dumps(json.loads(tok.to_str()), ensure_ascii=False, separators=(",", ":")) + "\n"
    config = {
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>",
        "pad_token": "<|finetune_right_pad_id|>",
        "model_max_length": 8192,
        "clean_up_tokenization_spaces": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }
    cfg_json = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
    return {"tokenizer.json": tok_json, "tokenizer_config.json": cfg_json}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing; exit 1 when they differ")
    args = ap.parse_args(argv)
    files = build(args.out)
    differ = []
    for name, text in files.items():
        path = os.path.join(args.out, name)
        if args.check:
            try:
                same = open(path, encoding="utf-8").read() == text
            except OSError:
                same = False
            if not same:
                differ.append(name)
        else:
            with open(path + ".tmp", "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(path + ".tmp", path)
    if differ:
        print(f"build_tokenizer: {', '.join(differ)} in {args.out} differ from what the script builds", file=sys.stderr)
        return 1
    print(json.dumps({"out": args.out, "files": sorted(files), "tokens": len(json.loads(files["tokenizer.json"])["model"]["vocab"])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
