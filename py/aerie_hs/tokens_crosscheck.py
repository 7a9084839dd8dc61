"""SpecForge's own preprocessing run beside aerie's (aerie_hs.tokens --cross-check).

Where SpecForge is importable on the host, its `preprocess_conversations` tokenizes the same
conversations with its own registry entry, and any difference from aerie's ids or mask stops
the run before anything is written. SpecForge (and with it torch) is imported only when the
cross-check runs.
"""
import warnings
from typing import List

from .chat_templates import TEMPLATE, Template


class Disagreement(RuntimeError):
    """SpecForge's own preprocessing made other tokens than aerie's: nothing may be written."""


def specforge_reference(name: str, tpl: Template):
    """SpecForge's preprocess_conversations bound to its registry entry for `name`, or None when
    SpecForge is not importable. A registry entry that differs from aerie's table is itself a
    disagreement: the host's SpecForge would make other tokens."""
    try:
        from specforge.data.preprocessing import preprocess_conversations
        from specforge.data.template import TEMPLATE_REGISTRY
    except ImportError as err:
        return None, f"{type(err).__name__}: {err}"
    try:
        theirs = TEMPLATE_REGISTRY.get(name)
    except KeyError:
        raise Disagreement(f"the host's SpecForge has no chat template {name!r}; aerie carries it from {TEMPLATE}")
    fields = {
        "assistant_header": (theirs.assistant_header, tpl.assistant_header),
        "user_header": (theirs.user_header, tpl.user_header),
        "system_prompt": (theirs.system_prompt, tpl.system_prompt),
        "end_of_turn_token": (theirs.end_of_turn_token, tpl.end_of_turn),
        "ignore_token": (tuple(theirs.ignore_token or ()), tpl.ignore),
        "parser_type": (theirs.parser_type, "general"),
        "assistant_pattern_type": (getattr(theirs, "assistant_pattern_type", "general"), "general"),
    }
    for field, (sf, ours) in fields.items():
        if sf != ours:
            raise Disagreement(f"chat template {name!r}: the host's SpecForge has {field}={sf!r}, aerie has {ours!r} ({TEMPLATE})")

    def run(tokenizer, conversations, max_length):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # tools per conversation: the default [[]] zips the batch down to one conversation
            # (SpecForge@a6b6b023:specforge/data/preprocessing.py:116,154).
            out = preprocess_conversations(tokenizer, conversations, theirs, max_length, tools=[[] for _ in conversations])
        return [(ids[0].tolist(), mask[0].tolist()) for ids, mask in zip(out["input_ids"], out["loss_mask"])]

    return run, None


def _first_difference(a: List[int], b: List[int]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"position {i}: aerie {x}, SpecForge {y}"
    return f"lengths: aerie {len(a)}, SpecForge {len(b)}"


def cross_check(reference, tokenizer, batch, max_length: int) -> None:
    """batch: [(id, conversation, ids, mask)] that aerie tokenized."""
    theirs = reference(tokenizer, [conv for _, conv, _, _ in batch], max_length)
    if len(theirs) != len(batch):
        raise Disagreement(f"SpecForge returned {len(theirs)} conversations for {len(batch)}")
    for (sid, _, ids, mask), (sf_ids, sf_mask) in zip(batch, theirs):
        if ids != sf_ids:
            raise Disagreement(f"sample {sid!r}: input_ids differ from SpecForge's at {_first_difference(ids, sf_ids)}")
        if mask != sf_mask:
            raise Disagreement(f"sample {sid!r}: loss_mask differs from SpecForge's at {_first_difference(mask, sf_mask)}")

