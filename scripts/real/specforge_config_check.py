#!/usr/bin/env python3
"""Judge a SpecForge run config with SpecForge's own loader, as `specforge train -c` does.

    .venv-specforge/bin/python scripts/real/specforge_config_check.py CONFIG [path=value ...]

`specforge train -c CONFIG k=v ...` builds its Config with `load_config(args.config,
args.overrides)` before anything touches a GPU (SpecForge@a6b6b023:specforge/cli.py:242;
the PyPI 0.2.0 wheel's cli.py is the same), and load_config is `Config.from_file` (YAML by
extension, then migrate_legacy_config, then Config.model_validate) followed by
apply_overrides, which re-validates (SpecForge@a6b6b023:specforge/config/schema.py:926-970;
the wheel's schema.py differs only in two docstrings). This script calls that same function
from the pinned wheel in .venv-specforge and prints one JSON line:

    {"ok": true|false, "errors": [{"loc": "training.max_steps", "msg": "..."}], "specforge": "<version> <file>"}

Exit status 0 when the judgement was made (ok or not), 1 when SpecForge could not be imported.
"""
from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 1
    path, overrides = argv[0], argv[1:]
    try:
        from importlib.metadata import version

        import pydantic
        from specforge.config import load_config
        import specforge.config.schema as schema
    except ImportError as exc:
        print(json.dumps({"ok": False, "errors": [{"loc": "", "msg": f"cannot import SpecForge's config loader: {exc}; run scripts/setup.sh --test"}]}))
        return 1
    judge = f"specforge {version('specforge')} {schema.__file__}"
    errors: list[dict[str, str]] = []
    try:
        load_config(path, overrides)
    except pydantic.ValidationError as exc:
        for e in exc.errors():
            errors.append({"loc": ".".join(str(p) for p in e["loc"]), "msg": e["msg"]})
    except (ValueError, OSError) as exc:
        # migrate_legacy_config and apply_overrides raise plain ValueError (no location);
        # a YAML syntax error is a yaml.YAMLError, itself not a ValueError: caught below.
        errors.append({"loc": "", "msg": str(exc)})
    except Exception as exc:  # yaml.YAMLError, or a document that is not a mapping
        errors.append({"loc": "", "msg": f"{type(exc).__name__}: {exc}"})
    print(json.dumps({"ok": not errors, "errors": errors, "specforge": judge}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
