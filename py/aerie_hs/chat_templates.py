"""SpecForge's chat templates, as aerie carries them for the tokens (aerie_hs.tokens).

The values of SpecForge's chat-template registry entries (each cited beside it), for the
templates whose assistant spans aerie_hs.tokens computes exactly. When SpecForge
is importable on the host, aerie_hs.tokens_crosscheck holds its registry against this table.
Stdlib only.
"""
from dataclasses import dataclass
from typing import Optional, Tuple

TEMPLATE = "SpecForge@a6b6b023:specforge/data/template.py"


@dataclass(frozen=True)
class Template:
    assistant_header: str
    user_header: str
    system_prompt: Optional[str]
    end_of_turn: str
    ignore: Tuple[str, ...] = ()


# Template data only (SpecForge's registry entries), for the general parser with the general
# assistant pattern: the templates whose spans this module computes exactly. Others (thinking,
# harmony, glm parsers) are refused rather than guessed.
TEMPLATES = {
    # SpecForge@a6b6b023:specforge/data/template.py:92-100
    "llama3": Template(
        assistant_header="<|start_header_id|>assistant<|end_header_id|>\n\n",
        user_header="<|start_header_id|>user<|end_header_id|>",
        system_prompt=(
            "You are a helpful, respectful and honest assistant. Always answer as helpfully as possible, "
            "while being safe.  Your answers should not include any harmful, unethical, racist, sexist, toxic, "
            "dangerous, or illegal content. Please ensure that your responses are socially unbiased and positive "
            "in nature.\n\nIf a question does not make any sense, or is not factually coherent, explain why "
            "instead of answering something not correct. If you don't know the answer to a question, please "
            "don't share false information."
        ),
        end_of_turn="<|eot_id|>",
    ),
    # SpecForge@a6b6b023:specforge/data/template.py:112-120
    "qwen": Template(
        assistant_header="<|im_start|>assistant\n",
        user_header="<|im_start|>user\n",
        system_prompt="You are a helpful assistant.",
        end_of_turn="<|im_end|>\n",
    ),
    # SpecForge@a6b6b023:specforge/data/template.py:207-216
    "qwen3-instruct": Template(
        assistant_header="<|im_start|>assistant\n",
        user_header="<|im_start|>user\n",
        system_prompt="You are a helpful assistant.",
        end_of_turn="<|im_end|>\n",
        ignore=("<think>\n\n</think>\n\n",),
    ),
    # SpecForge@a6b6b023:specforge/data/template.py:242-250
    "kimi-k2-instruct": Template(
        assistant_header="<|im_assistant|>assistant<|im_middle|>",
        user_header="<|im_start|>user\n",
        system_prompt="You are a helpful assistant.",
        end_of_turn="<|im_end|>",
    ),
    # SpecForge@a6b6b023:specforge/data/template.py:271-279
    "deepseek-v3": Template(
        assistant_header="<\uff5cAssistant\uff5c>",
        user_header="<\uff5cUser\uff5c>",
        system_prompt="You are a helpful assistant.",
        end_of_turn="<\uff5cend\u2581of\u2581sentence\uff5c>",
    ),
}


def template(name: str) -> Template:
    if name not in TEMPLATES:
        raise KeyError(
            f"chat template {name!r} is not one aerie tokenizes (supported: {', '.join(sorted(TEMPLATES))}); "
            f"set extract's chat-template to one of them"
        )
    return TEMPLATES[name]
