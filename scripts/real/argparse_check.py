#!/usr/bin/env python3
"""Parse an argv with a real script's parser, rebuilt from its recorded add_argument calls.

    python3 scripts/real/argparse_check.py SPEC.json -- ARG...

SPEC.json is what scripts/real/extract_argparse.py recorded from the script's source (the
option strings and keyword settings of each add_argument call, in order). This builds a real
argparse.ArgumentParser with the same settings, including allow_abbrev as the original
constructed it (argparse's default, True, unless the script said otherwise), and parses ARG...
with the same call the script makes (parse_args rejects unknown options).

On success: exit 0 and one JSON line {"args": {dest: value}, "unchecked": [...]} where
unchecked names any setting that was not a literal in the source (so it could not be rebuilt,
e.g. choices imported from sglang) and so was not enforced. On a rejection: argparse's own
usage and error message on stderr and exit 2, exactly as the script would.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

TYPES = {"str": str, "int": int, "float": float}


def build(spec: dict) -> tuple[argparse.ArgumentParser, list[str]]:
    kwargs = dict(spec["parser"]["kwargs"])
    kwargs.setdefault("prog", os.path.basename(spec["path"]))
    parser = argparse.ArgumentParser(**kwargs)
    unchecked: list[str] = []
    for arg in spec["arguments"]:
        flags = arg["flags"]
        kw: dict = {}
        for key, val in arg.items():
            if key in ("flags", "source"):
                continue
            if isinstance(val, dict) and "expr" in val:
                unchecked.append(f"{flags[0]} {key}={val['expr']} ({arg['source']})")
                continue
            if key == "type":
                if val not in TYPES:
                    unchecked.append(f"{flags[0]} type={val} ({arg['source']})")
                    continue
                val = TYPES[val]
            if key == "action" and isinstance(val, dict):
                val = getattr(argparse, val["class"])
            kw[key] = val
        parser.add_argument(*flags, **kw)
    return parser, unchecked


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 1
    with open(argv[0]) as f:
        spec = json.load(f)
    parser, unchecked = build(spec)
    parse = spec["parser"]["parse"]
    if parse == ["parse_args"]:
        ns = parser.parse_args(argv[2:])
    elif parse == ["parse_known_args"]:
        ns, _rest = parser.parse_known_args(argv[2:])
    else:
        print(f"{argv[0]}: the script parses with {parse}; not rebuilt", file=sys.stderr)
        return 1
    print(json.dumps({"args": vars(ns), "unchecked": unchecked}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
