#!/usr/bin/env python3
"""Record, from a pinned SGLang wheel's own source, the names aerie's capture hooks.

Reads the wheel as a zip (nothing is installed or imported from it), parses each module that
py/aerie_hs/sglang_targets.py declares a target in, and writes what the source has for each
declared name: a function's parameter list (keyword-only ones after "*") and line, or for a
class, the line at which each declared attribute is defined (a class-body field or enum member,
or a `self.<name> =` in any of its methods; null when absent). The test
test/py/capture-points.test.ts then holds sglang_hook.py's declarations against this record.

usage: sglang_capture_points.py WHEEL OUT_DIR     (writes OUT_DIR/capture-points.json)
"""

import ast
import hashlib
import json
import os
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "py"))
from aerie_hs.sglang_hook import TARGETS  # noqa: E402  (stdlib-only module)


def params_of(fn):
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        names.append("*")
    names += [p.arg for p in a.kwonlyargs]
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    return names


def find(tree, qualname):
    node = tree
    for part in qualname.split("."):
        body = getattr(node, "body", [])
        hits = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.name == part]
        if not hits:
            return None
        node = hits[-1]  # a later definition wins, as at import time
    return node


def class_attrs(cls):
    found = {}
    for n in cls.body:
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            found.setdefault(n.target.id, n.lineno)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    found.setdefault(t.id, n.lineno)
    for fn in ast.walk(cls):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []
                for t in targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        found.setdefault(t.attr, n.lineno)
    return found


def main(wheel, out_dir):
    z = zipfile.ZipFile(wheel)
    version_src = z.read("sglang/_version.py").decode()
    version = ast.literal_eval(version_src.split("__version__ = version = ", 1)[1].splitlines()[0])
    if version not in TARGETS:
        sys.exit(f"sglang_targets.py declares no targets for SGLang {version}")
    functions, fields = {}, {}
    for kind, module, qualname, names in TARGETS[version]:
        path = module.replace(".", "/") + ".py"
        key = f"{module}:{qualname}"
        try:
            tree = ast.parse(z.read(path).decode(), path)
        except KeyError:
            (functions if kind == "function" else fields)[key] = None
            continue
        node = find(tree, qualname)
        if kind == "function":
            ok = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            functions[key] = {"file": path, "line": node.lineno, "params": params_of(node)} if ok else None
        else:
            if not isinstance(node, ast.ClassDef):
                fields[key] = None
                continue
            attrs = class_attrs(node)
            fields[key] = {"file": path, "line": node.lineno, "attrs": {a: attrs.get(a) for a in names}}
    h = hashlib.sha256()
    with open(wheel, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    record = {"sglang": version, "wheel": os.path.basename(wheel), "wheel_sha256": h.hexdigest(),
              "functions": functions, "fields": fields}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "capture-points.json"), "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    missing = [k for k, v in {**functions, **fields}.items() if v is None]
    print(f"sglang {version}: {len(functions)} functions, {len(fields)} classes; missing: {missing or 'none'}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
