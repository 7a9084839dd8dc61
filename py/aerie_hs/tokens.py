"""The training tokens of each sample, exactly as SpecForge's offline trainer would make them.

Offline SpecForge never re-tokenizes: it trains on the `input_ids` and `loss_mask` stored beside
the hidden states. So the extraction must prefill the very ids SpecForge's preprocessing would
have produced from the conversation, and store its mask; any other rendering trains the drafter
on text the target never serves. This module is aerie's own implementation of that
preprocessing for the templates aerie supports, run on the GPU host with the target's own
tokenizer. Where SpecForge is importable it also runs SpecForge's `preprocess_conversations`
on the same conversations and refuses to write anything that disagrees.

Needs transformers (every target environment has it); no torch unless SpecForge is used.
The template table is in chat_templates.py, the SpecForge cross-check in tokens_crosscheck.py.

CLI:
  python -m aerie_hs.tokens --model PATH --chat-template NAME --max-length N \
      < conversations.jsonl > ids.jsonl
One output line per input line, in order: {"id", "input_ids", "loss_mask"} or {"id", "error"};
a line that is no sample at all (bad JSON, no id, no conversation list) gives
{"id": null, "line": N, "error"} and is counted (and copied to --rejects when given).
A summary goes to stderr as the last line: {"aerie_tokens": {...}}.
Exit status: 0 done (per-line errors included), 2 usage or set-up error, 3 SpecForge disagrees.
"""
import argparse
import json
import re
import sys
from typing import List, Tuple

from .chat_templates import TEMPLATES, Template, template
from .tokens_crosscheck import Disagreement, cross_check, specforge_reference

# Where the behaviour below comes from: "PARSE:<lines>" is SpecForge@a6b6b023:specforge/data/parse.py
# (byte-identical in PyPI specforge 0.2.0, like preprocessing.py and template.py).
#
# The mask is stored unshifted, 1 on the answer tokens themselves: that is what SpecForge's
# preprocessing stores and its trainer reads. At a6b6b023 the trainer shifts input_ids and the
# target left by one but not loss_mask (SpecForge@a6b6b023:specforge/modeling/target/target_head.py:103-108);
# SpecForge#885 / PR #895 (open, after a6b6b023) would shift the mask there too, in the trainer,
# so the stored files are right either way and must not be shifted here.


class SampleError(ValueError):
    """This conversation cannot be tokenized; the line gets {"id", "error"}."""


def normalize_turn(raw, n: int) -> dict:
    """A turn in either SpecForge ({role, content}) or ShareGPT ({from, value}) form.

    SpecForge takes `role` before `from`, the first non-empty of `content`/`value`, and maps
    human→user, gpt→assistant only (PARSE:105-117); other roles pass through unchanged.
    """
    if not isinstance(raw, dict):
        raise SampleError(f"turn {n}: not an object")
    role = raw.get("role", raw.get("from", ""))
    content = raw.get("content") or raw.get("value") or ""
    if not isinstance(role, str):
        raise SampleError(f"turn {n}: role is not a string")
    if not isinstance(content, str):
        raise SampleError(f"turn {n}: content is not a string")
    role = {"human": "user", "gpt": "assistant"}.get(role, role)
    out = {k: v for k, v in raw.items() if k not in ("from", "value")}
    out["role"] = role
    out["content"] = content
    return out


def _json_or(value, fallback):
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return fallback


def sanitize_turn(turn: dict) -> dict:
    """Only role, content and tool_calls reach the chat template, tool_calls as parsed JSON
    with just id/type/function{name, arguments} (PARSE:40-103)."""
    out = {k: turn[k] for k in ("role", "content", "tool_calls") if k in turn}
    if "tool_calls" not in out:
        return out
    calls = _json_or(out["tool_calls"], None)
    if calls is None and isinstance(out["tool_calls"], str):
        del out["tool_calls"]
        return out
    if isinstance(calls, list):
        kept = []
        for call in calls:
            if not isinstance(call, dict):
                continue
            clean = {"id": call.get("id", ""), "type": call.get("type", "function")}
            fn = call.get("function", {})
            if isinstance(fn, dict):
                clean["function"] = {"name": fn.get("name", ""), "arguments": _json_or(fn.get("arguments", {}), {})}
            kept.append(clean)
        calls = kept
    out["tool_calls"] = calls
    return out


def build_messages(conversation, tpl: Template) -> List[dict]:
    """The messages SpecForge hands the chat template (PARSE:196-241): the data's own leading
    system prompt, else the template's default; turns before the first user turn dropped; the
    conversation cut at a tool turn not after assistant/tool, or an assistant turn not after
    user/tool."""
    if not isinstance(conversation, list):
        raise SampleError("conversations is not a list")
    if not conversation:
        # SpecForge skips an empty conversation without a trace (SpecForge@a6b6b023:specforge/data/preprocessing.py:155-157),
        # which would misalign every later sample with its id: refuse it here instead.
        raise SampleError("no turns (empty conversation)")
    turns = [normalize_turn(t, i + 1) for i, t in enumerate(conversation)]
    messages = []
    if turns[0]["role"] == "system":
        messages.append({"role": "system", "content": turns[0]["content"]})
        turns = turns[1:]
    elif tpl.system_prompt:
        messages.append({"role": "system", "content": tpl.system_prompt})
    while turns and turns[0]["role"] != "user":
        turns = turns[1:]
    for j, turn in enumerate(turns):
        prev = turns[j - 1]["role"] if j > 0 else None
        if j > 0 and turn["role"] == "tool" and prev not in ("assistant", "tool"):
            break
        if j > 0 and turn["role"] == "assistant" and prev not in ("user", "tool"):
            break
        messages.append(sanitize_turn(turn))
    return messages


def render(tokenizer, messages: List[dict], tpl: Template) -> str:
    """The tokenizer's own chat template, no generation prompt (PARSE:136-144); a tokenizer
    without one gets SpecForge's plain concatenation (PARSE:242-266)."""
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False, tools=None)
    except (ValueError, TypeError):
        parts = [tokenizer.bos_token] if getattr(tokenizer, "bos_token", None) else []
        for m in messages:
            if m["role"] == "system":
                parts.append(m["content"])
            elif m["role"] == "user":
                parts.append(tpl.user_header + m["content"])
            elif m["role"] == "assistant":
                parts.append(tpl.assistant_header + m["content"] + tpl.end_of_turn)
        return "".join(parts)


def assistant_spans(text: str, tpl: Template) -> List[Tuple[int, int]]:
    """Character spans of each assistant answer: from just after the assistant header through
    the first end-of-turn token after it (inclusive), or to the end of the text when the turn
    is open. The same lazy match as SpecForge's general pattern (PARSE:179-185, 282), so a
    trailing newline at the very end stays outside an open turn, as `$` has it."""
    pattern = re.compile(re.escape(tpl.assistant_header) + "(.*?(?:" + re.escape(tpl.end_of_turn) + "|$))", re.DOTALL)
    return [(m.start(1), m.end(1)) for m in pattern.finditer(text)]


def _prefix_len(tokenizer, text: str, end: int, max_length: int) -> int:
    # Token positions come from re-encoding the text up to a character offset, as SpecForge does
    # (PARSE:286-314): where a token straddles the offset this differs from offset mapping, and
    # the ids must match SpecForge's, not be "more right".
    return len(tokenizer.encode(text[:end], add_special_tokens=False, truncation=True, max_length=max_length))


def tokenize(tokenizer, conversation, tpl: Template, max_length: int) -> Tuple[List[int], List[int]]:
    """input_ids and loss_mask for one conversation (PARSE:187-349)."""
    text = render(tokenizer, build_messages(conversation, tpl), tpl)
    # add_special_tokens=False: the chat template already put the BOS in (PARSE:272-280).
    ids = list(tokenizer(text, max_length=max_length, truncation=True, add_special_tokens=False)["input_ids"])
    mask = [0] * len(ids)
    for start, end in assistant_spans(text, tpl):
        a = min(_prefix_len(tokenizer, text, start, max_length), len(ids))
        b = min(_prefix_len(tokenizer, text, end, max_length), len(ids))
        for i in range(a, b):
            mask[i] = 1
    # Ignored strings (a Qwen3 empty think block) are unmasked after, in every occurrence (PARSE:316-347).
    for token in tpl.ignore:
        at = text.find(token)
        while at != -1:
            a = min(_prefix_len(tokenizer, text, at, max_length), len(ids))
            b = min(_prefix_len(tokenizer, text, at + len(token), max_length), len(ids))
            for i in range(a, b):
                mask[i] = 0
            at = text.find(token, at + len(token))
    return ids, mask



def parse_line(line: str):
    """(id, conversation) or a reason the line is no sample. Ids may be strings or integers."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        return None, f"bad JSON: {err}"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    sid = obj.get("id")
    if isinstance(sid, bool) or not isinstance(sid, (str, int)) or sid == "":
        return None, "no id (a non-empty string or an integer)"
    if not isinstance(obj.get("conversations"), list):
        return None, f"sample {sid}: no conversations list"
    return (str(sid), obj["conversations"]), None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m aerie_hs.tokens", description="SpecForge's training tokens of each conversation")
    ap.add_argument("--model", required=True, help="the target's directory (its tokenizer and chat template)")
    ap.add_argument("--chat-template", required=True, help=f"SpecForge's template name: {', '.join(sorted(TEMPLATES))}")
    ap.add_argument("--max-length", required=True, type=int)
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument("--cross-check", choices=("auto", "require", "off"), default="auto",
                    help="run SpecForge's own preprocessing too: when importable (auto), or fail without it (require)")
    ap.add_argument("--batch", type=int, default=64, help="conversations per SpecForge call")
    ap.add_argument("--rejects", help="copy lines that are no sample at all to this file")
    args = ap.parse_args(argv)
    try:
        tpl = template(args.chat_template)
    except KeyError as err:
        print(f"aerie_hs.tokens: --chat-template: {err.args[0]}", file=sys.stderr)
        return 2
    if args.max_length < 1:
        print(f"aerie_hs.tokens: --max-length must be a positive integer, got {args.max_length}", file=sys.stderr)
        return 2
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
    except Exception as err:  # noqa: BLE001 - any load failure is a set-up error naming the path
        print(f"aerie_hs.tokens: --model {args.model}: cannot load its tokenizer: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    reference, why_not = None, None
    try:
        if args.cross_check != "off":
            reference, why_not = specforge_reference(args.chat_template, tpl)
    except Disagreement as err:
        print(f"aerie_hs.tokens: {err}", file=sys.stderr)
        return 3
    if args.cross_check == "require" and reference is None:
        print(f"aerie_hs.tokens: --cross-check require: SpecForge is not importable here ({why_not})", file=sys.stderr)
        return 2

    counts = {"lines": 0, "ok": 0, "errors": 0, "malformed": 0}
    rejects = open(args.rejects, "w", encoding="utf-8") if args.rejects else None
    pending = []  # output lines, with what the cross-check needs for the tokenized ones

    def flush():
        if reference is not None:
            cross_check(reference, tokenizer, [p[1] for p in pending if p[1] is not None], args.max_length)
        for out, _ in pending:
            sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        pending.clear()

    try:
        for n, line in enumerate(sys.stdin, start=1):
            counts["lines"] += 1
            parsed, reason = parse_line(line) if line.strip() else (None, "blank line")
            if parsed is None:
                counts["malformed"] += 1
                if rejects:
                    rejects.write(line if line.endswith("\n") else line + "\n")
                pending.append(({"id": None, "line": n, "error": reason}, None))
            else:
                sid, conv = parsed
                try:
                    ids, mask = tokenize(tokenizer, conv, tpl, args.max_length)
                    counts["ok"] += 1
                    pending.append(({"id": sid, "input_ids": ids, "loss_mask": mask}, (sid, conv, ids, mask)))
                except SampleError as err:
                    counts["errors"] += 1
                    pending.append(({"id": sid, "error": str(err)}, None))
            if len(pending) >= args.batch:
                flush()
        flush()
    except Disagreement as err:
        print(f"aerie_hs.tokens: {err}", file=sys.stderr)
        return 3
    finally:
        if rejects:
            rejects.close()
    method = "aerie+specforge" if reference is not None else "aerie"
    print(json.dumps({"aerie_tokens": {**counts, "method": method, "chat_template": args.chat_template, "max_length": args.max_length}}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
