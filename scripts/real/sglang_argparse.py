#!/usr/bin/env python3
"""SGLang's own argument parser as a judge of the launch lines aerie renders. Parse only.

    .venv-sglang-0.5.23/bin/python scripts/real/sglang_argparse.py < {"argvs": [[...], ...]}

Each argv is what follows `python -m sglang.launch_server`. For each one this prints (one JSON
document on stdout, {"sglang", "standins", "verdicts": [...]}) {"ok", "exit", "error",
"stderr", "warnings", "standins_touched", "validation_error"}: the release's parser is built and
run as launch_server builds it (_parse), argparse's exit status and message are kept, every
warning the parser logs or raises (the deprecation notes) is listed without ANSI colour, and on
0.5.23 the model-independent validation steps that follow run too (_validate_0523). "ok" means
both passed. No server is started, no model is read and nothing touches a GPU.

The venv (scripts/setup-sglang.sh) holds the release's PyPI wheel without its dependencies.
Importing `sglang.srt.server_args` pulls in torch and other heavy packages at module level; the
parser never calls them, so sglang_standins.STANDINS lists, per release, exactly which top-level modules are
answered by a permissive placeholder instead (every other import is real or fails). That the
parser never calls them is checked on every run, not assumed: while an argv is parsed (and the
post-parse steps below run) any attribute read or call on a stand-in is recorded in
`standins_touched`, and the parser's actions are scanned for a stand-in value in their type,
choices, default or const. The test requires both to be empty.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import json
import logging
import re
import sys
import warnings

from sglang_standins import Record, install_standins, is_standin  # beside this script (sys.path[0])


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _Warnings(logging.Handler):
    """Collects the parser's warnings: sglang logs its deprecation notes at WARNING."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(_ANSI.sub("", record.getMessage()))


def _import_parser(version: str):
    """What launch_server imports before it parses, for this release."""
    # sglang==0.5.23:launch_server.py:9-10 and :79-81 (load_plugins() then prepare_server_args);
    # sglang==0.5.12:launch_server.py:8 and :62-66; sglang==0.5.9:launch_server.py:7 and :32
    # (no plugins yet); sglang==0.5.4:launch_server.py:7 and :11.
    # launch_server itself is not imported: its module-level suppress_noisy_warnings()
    # (0.5.23 :14, 0.5.12 :12) only quietens third-party loggers and needs huggingface_hub.
    # load_plugins finds no plugin in this venv; aerie's capture plugin declares no flags
    # (py/aerie_hs/sglang_hook.py), so the parser is the same with it.
    server_args = importlib.import_module("sglang.srt.server_args")
    if version in ("0.5.23", "0.5.12"):
        importlib.import_module("sglang.srt.plugins").load_plugins()
    if version == "0.5.23":
        # prepare_server_args imports this lazily after from_cli_args (sglang==0.5.23:
        # srt/server_args.py:714-719); it imports torch at module level (core.py:8), so it is
        # imported here, before the stand-ins are watched: redact_watermark_command_line itself
        # (core.py:110-130) only walks the argv strings.
        importlib.import_module("sglang.srt.sampling.watermarking.core")
    return server_args


def _validate_0523(record) -> str | None:
    """The model-independent checks of 0.5.23's resolution that the capture lines depend on.

    resolve_once (sglang==0.5.23:srt/server_args.py:244) runs the whole pipeline
    (arg_groups/pipeline.py:20), whose module imports the model configs (transformers) and whose
    later steps read the model's config.json and the device; so only these steps run, in the
    pipeline's order (pipeline.py:90-94), through run_hook as the pipeline calls them. They read
    the record's own fields: the prefill/decode interval, the response store, the sampling mask
    and --enable-return-aux-hidden-states with its --speculative-algorithm, draft path, pp size and
    layer ids (validation_hook.py:697-749). The hooks before them (pipeline.py:42-80: deprecated
    DP attention, mega MoE, hidden-states mode, media URLs, watermark, HiCache ratio, offload)
    write declarations none of these read. Returns the ValueError's message, or None.
    """
    from sglang.srt.arg_groups import validation_hook as v
    from sglang.srt.arg_groups.resolution_hooks import run_hook

    try:
        for step in (v.validate_prefill_decode_interval, v.validate_response_store, v.validate_sampling_mask_max_tokens, v.handle_aux_hidden_state_capture):
            run_hook(step, record)
    except ValueError as e:
        return str(e)
    return None


def _parser_carries_standin(parser: argparse.ArgumentParser) -> list[str]:
    found = []
    for action in parser._actions:
        values = [action.type, action.default, action.const, *(action.choices or [])]
        # An empty choice list would be one built by iterating a stand-in (it iterates as empty).
        empty = action.choices is not None and len(list(action.choices)) == 0
        if empty or any(is_standin(v) for v in values) or any(is_standin(b) for b in type(action).__mro__):
            found.append(f"parser action {'/'.join(action.option_strings) or action.dest}")
    return found


def _parse(server_args, version: str, argv: list[str]) -> dict:
    """One argv through the release's own parse, as prepare_server_args runs it."""
    validation = None
    exception = None
    handler = _Warnings()
    sglang_logger = logging.getLogger("sglang")
    sglang_logger.addHandler(handler)
    err = io.StringIO()
    code = 0
    Record.touched = []
    Record.armed = True
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if version == "0.5.23":
                    # The whole of it (sglang==0.5.23:srt/server_args.py:668-720): parser, --config
                    # merge, parse_args, from_cli_args. ServerArgs.__post_init__ is empty on purpose
                    # (server_args.py:241-242); resolution (resolve_once, server_args.py:244, called by
                    # launch_server.py:29) needs the model's config and the device, and is not run.
                    record = server_args.prepare_server_args(argv)
                    validation = _validate_0523(record)
                else:
                    # prepare_server_args (sglang==0.5.12:srt/server_args.py:7723-7757,
                    # sglang==0.5.9:srt/server_args.py:5568-5592, sglang==0.5.4:srt/server_args.py:3643-3678)
                    # line for line, except that from_cli_args' dataclass __post_init__ (0.5.12 :856,
                    # 0.5.9 :703, 0.5.4 :525) reads the model config and probes GPU memory: only its
                    # deprecation handler runs (_handle_deprecated_args, 0.5.12 :1111, 0.5.9 :829,
                    # 0.5.4 :608), which needs neither.
                    parser = argparse.ArgumentParser(prog="sglang serve") if version == "0.5.12" else argparse.ArgumentParser()
                    if version == "0.5.4" and "--config" in argv:
                        from sglang.srt.server_args_config_parser import ConfigArgumentMerger

                        probe = argparse.ArgumentParser()
                        server_args.ServerArgs.add_cli_args(probe)
                        booleans = [a.dest for a in probe._actions if getattr(a, "action", None) in ("store_true", "store_false")]
                        argv = ConfigArgumentMerger(boolean_actions=booleans).merge_config_with_args(argv)
                    server_args.ServerArgs.add_cli_args(parser)
                    if version in ("0.5.12", "0.5.9") and "--config" in argv:
                        from sglang.srt.server_args_config_parser import ConfigArgumentMerger

                        argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
                    raw_args = parser.parse_args(argv)
                    cls = server_args.ServerArgs
                    original = cls.__post_init__
                    cls.__post_init__ = lambda self: self._handle_deprecated_args()
                    try:
                        cls.from_cli_args(raw_args)
                    finally:
                        cls.__post_init__ = original
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except Exception as e:  # noqa: BLE001 - what escapes the parse is what the launch dies of
                # 0.5.4's DeprecatedAction raises ValueError(help) mid-parse (sglang==0.5.4:
                # srt/server_args.py:3797-3798): an uncaught traceback, exit 1.
                code = 1
                exception = f"{type(e).__name__}: {e}"
    finally:
        Record.armed = False
        sglang_logger.removeHandler(handler)
    touched = list(Record.touched)
    probe = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(probe)
    touched += _parser_carries_standin(probe)
    stderr = _ANSI.sub("", err.getvalue())
    return {
        "ok": code == 0 and validation is None and exception is None,
        "exit": code,
        # argparse prints its usage (hundreds of flags) before the message: keep the message.
        "error": next((line.split(": error: ", 1)[1] for line in stderr.splitlines() if ": error: " in line), None),
        # The whole `<prog>: error: <message>` line, and the prog the usage names (`usage: <prog> [-h] ...`).
        "error_line": next((line for line in stderr.splitlines() if ": error: " in line), None),
        "usage_prog": next((m.group(1) for m in [re.match(r"usage: (.*?) \[-h\]", stderr)] if m), None),
        "stderr": "\n".join(stderr.strip().splitlines()[-3:]),
        "warnings": handler.messages + [_ANSI.sub("", str(w.message)) for w in caught],
        "standins_touched": touched,
        # 0.5.23 only: the model-independent validation steps run after the parse (None: not run).
        "validation_error": validation,
        # An exception other than argparse's exit that ended the parse (`Type: message`).
        "exception": exception,
    }


def _json_safe(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return repr(value)


def _inventory(server_args) -> list[dict]:
    """Every option the release's parser declares, as argparse sees it: what the simulator's
    per-release flag table (sim/sglang/args-flags.json) is generated from and checked against."""
    parser = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(parser)
    out = []
    for action in parser._actions:
        entry = {
            "names": list(action.option_strings),
            "dest": action.dest,
            "nargs": action.nargs,
            "type": getattr(action.type, "__name__", repr(action.type)) if action.type is not None else None,
            # A set's order changes with each interpreter's hash seed (--sampling-backend's, 0.5.9+),
            # and so does the order argparse lists it in: recorded sorted, and marked.
            "choices": _json_safe(sorted(action.choices) if isinstance(action.choices, (set, frozenset)) else list(action.choices)) if action.choices is not None else None,
            "action": type(action).__name__,
            "required": bool(action.required),
        }
        if isinstance(action.choices, (set, frozenset)):
            entry["choices_unordered"] = True
        # sglang's deprecation actions (0.5.23 arg_groups/argparse_actions.py, older server_args.py).
        if type(action).__name__.startswith("Deprecated"):
            entry["help"] = action.help
        for attr in ("new_flag", "error_message", "const_value"):
            if getattr(action, attr, None) is not None:
                entry[attr] = _json_safe(getattr(action, attr))
        out.append(entry)
    return out


def _watch_self_test(name: str) -> list[str]:
    """Proof that the watch sees a stand-in being used: touch one while armed."""
    module = importlib.import_module(name)
    Record.touched = []
    Record.armed = True
    try:
        getattr(module, "cuda").is_available()
    finally:
        Record.armed = False
    return list(Record.touched)


def merge_inventories(paths: list[str]) -> str:
    """The simulator's flag table (sim/sglang/args-flags.json) from each release's `inventory`
    (one output of this script per venv): one entry per distinct option, `in` giving its
    position in each release's parser that has it (argparse lists ambiguous matches in that order)."""
    merged: dict[str, dict] = {}
    releases = []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        releases.append(doc["sglang"])
        for i, entry in enumerate(doc["inventory"]):
            key = json.dumps(entry, sort_keys=True)
            merged.setdefault(key, {"in": {}, **entry})["in"][doc["sglang"]] = i
    lines = ",\n".join("    " + json.dumps(e) for e in merged.values())
    about = "Generated by scripts/real/sglang_argparse.py from each release's own parser (see SGLANG-ARGPARSE.md); checked by test/real/sim-argparse-judge.test.ts. Do not edit."
    return f'{{\n  "about": {json.dumps(about)},\n  "releases": {json.dumps(releases)},\n  "flags": [\n{lines}\n  ]\n}}\n'


def main() -> int:
    if sys.argv[1:2] == ["--merge-inventories"]:
        sys.stdout.write(merge_inventories(sys.argv[2:]))
        return 0
    version = importlib.metadata.version("sglang")
    standins = install_standins(version)
    request = json.load(sys.stdin)
    # argparse names itself after sys.argv[0] where prepare_server_args gives no prog (0.5.4):
    # under `python -m sglang.launch_server` that is launch_server.py.
    sys.argv[0] = "launch_server.py"
    with warnings.catch_warnings():
        # Import-time notes (fla: "Triton is not supported on current platform") are not the parser's.
        warnings.simplefilter("ignore")
        server_args = _import_parser(version)
    verdicts = [_parse(server_args, version, list(argv)) for argv in request["argvs"]]
    out = {"sglang": version, "standins": standins, "verdicts": verdicts}
    if request.get("inventory"):
        out["inventory"] = _inventory(server_args)
    if "watch_self_test" in request:
        out["watch_self_test"] = _watch_self_test(request["watch_self_test"])
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
