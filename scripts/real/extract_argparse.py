#!/usr/bin/env python3
"""Record a real script's argparse interface from its source, without running it.

    python3 scripts/real/extract_argparse.py --git-dir REPO --rev COMMIT --path scripts/train_eagle3.py > spec.json

SpecForge's v0.2 scripts import torch, sglang and CUDA-only code before they build their
parser, so CI (no torch, no GitHub) cannot import them. Their interface is plain
`add_argument(...)` calls, though, so this reads the source with `ast` and writes down each
call's settings; scripts/real/argparse_check.py rebuilds a real argparse parser from that.
Nothing is executed and no code is copied: only the option strings and keyword settings.

Followed: every `*.add_argument(...)` in the function that constructs the ArgumentParser, in
source order, and `Cls.add_args(group)` where Cls is imported from a module of the same
repository (`from specforge.args import SGLangBackendArgs`): that module is read at the same
revision and the static method's calls are recorded in place. A setting that is not a
literal (e.g. `choices=ATTENTION_BACKEND_CHOICES`, imported from sglang) is recorded as
{"expr": "<source text>"}; argparse_check.py leaves such a check out and says so.
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys

KEYWORDS = ("dest", "type", "nargs", "action", "choices", "required", "default", "const", "metavar")


class Source:
    def __init__(self, git_dir: str, rev: str):
        self.git_dir, self.rev = git_dir, rev

    def read(self, path: str) -> bytes:
        return subprocess.run(["git", "--git-dir", self.git_dir, "show", f"{self.rev}:{path}"], check=True, capture_output=True).stdout

    def blob(self, path: str) -> str:
        return subprocess.run(["git", "--git-dir", self.git_dir, "rev-parse", f"{self.rev}:{path}"], check=True, capture_output=True, text=True).stdout.strip()


def value(node: ast.expr, text: str):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return {"expr": ast.get_source_segment(text, node)}


def setting(key: str, node: ast.expr, text: str):
    if key == "type" and isinstance(node, ast.Name):
        return node.id
    if key == "action" and isinstance(node, (ast.Name, ast.Attribute)):
        # argparse.BooleanOptionalAction and friends: the class name is what argparse knows.
        return {"class": node.attr if isinstance(node, ast.Attribute) else node.id}
    return value(node, text)


def calls_in_order(fn: ast.AST) -> list[ast.Call]:
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def imported_modules(tree: ast.Module) -> dict[str, str]:
    """Name → repository path of the module it is imported from (only `from X import Name`)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                out[alias.asname or alias.name] = node.module.replace(".", "/") + ".py"
    return out


def parser_function(tree: ast.Module) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for call in calls_in_order(node):
                if call.func.attr == "ArgumentParser":
                    return node
    raise SystemExit("no function constructs an argparse.ArgumentParser")


def record_calls(fn: ast.AST, text: str, path: str, src: Source, imports: dict[str, str], files: dict, out: list) -> None:
    for call in calls_in_order(fn):
        attr, owner = call.func.attr, call.func.value
        if attr == "add_mutually_exclusive_group":
            # Not used by the scripts recorded so far; rebuilding one needs its membership.
            raise SystemExit(f"{path}:{call.lineno}: mutually exclusive groups are not handled; extend the extractor")
        if attr == "add_argument":
            arg = {"flags": [value(a, text) for a in call.args], "source": f"{path}:{call.lineno}"}
            for kw in call.keywords:
                if kw.arg in KEYWORDS:
                    arg[kw.arg] = setting(kw.arg, kw.value, text)
            out.append(arg)
        elif attr == "add_args" and isinstance(owner, ast.Name) and owner.id in imports:
            mod_path = imports[owner.id]
            try:
                mod_text = src.read(mod_path).decode()
            except subprocess.CalledProcessError:
                raise SystemExit(f"{path}:{call.lineno}: {owner.id}.add_args is from {mod_path}, not in the repository at {src.rev}")
            files[mod_path] = src.blob(mod_path)
            mod = ast.parse(mod_text)
            cls = next((n for n in mod.body if isinstance(n, ast.ClassDef) and n.name == owner.id), None)
            method = cls and next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_args"), None)
            if method is None:
                raise SystemExit(f"{mod_path}: no {owner.id}.add_args")
            record_calls(method, mod_text, mod_path, src, imported_modules(mod), files, out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--rev", required=True)
    ap.add_argument("--path", required=True)
    a = ap.parse_args()
    src = Source(a.git_dir, a.rev)
    text = src.read(a.path).decode()
    tree = ast.parse(text)
    fn = parser_function(tree)
    ctor = next(c for c in calls_in_order(fn) if c.func.attr == "ArgumentParser")
    parser_kwargs = {kw.arg: value(kw.value, text) for kw in ctor.keywords if kw.arg in ("prog", "allow_abbrev", "add_help", "prefix_chars", "exit_on_error")}
    parse_calls = sorted({c.func.attr for c in calls_in_order(tree) if c.func.attr in ("parse_args", "parse_known_args", "parse_intermixed_args")})
    files = {a.path: src.blob(a.path)}
    arguments: list = []
    record_calls(fn, text, a.path, src, imported_modules(tree), files, arguments)
    commit = subprocess.run(["git", "--git-dir", a.git_dir, "rev-parse", a.rev], check=True, capture_output=True, text=True).stdout.strip()
    spec = {
        "repository": "github:sgl-project/SpecForge",
        "commit": commit,
        "path": a.path,
        "blobs": files,
        "parser": {"constructed_at": f"{a.path}:{ctor.lineno}", "kwargs": parser_kwargs, "parse": parse_calls},
        "arguments": arguments,
    }
    json.dump(spec, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
