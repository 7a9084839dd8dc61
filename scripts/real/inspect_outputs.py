#!/usr/bin/env python3
"""Small, text-only views of SpecForge outputs for fixtures.

  inspect_outputs.py zip FILE.pt            entry names and sizes of a torch.save zip
  inspect_outputs.py st-header FILE         safetensors header as JSON (names, dtypes, shapes)
  inspect_outputs.py pt-summary FILE.pt     top-level keys of a torch.load'ed file with tensor dtypes/shapes
"""
import json
import struct
import sys
import zipfile


def zip_entries(path):
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            print(f"{info.file_size:>12} {info.compress_type} {info.filename}")


def st_header(path):
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
    out = {"header_bytes": n}
    for name in sorted(header):
        v = header[name]
        out[name] = v if name == "__metadata__" else {"dtype": v["dtype"], "shape": v["shape"]}
    print(json.dumps(out, indent=1))


def describe(v, depth=0):
    import torch

    if torch.is_tensor(v):
        return f"tensor {v.dtype} {list(v.shape)}"
    if isinstance(v, dict):
        if depth >= 2:
            return f"dict({len(v)} keys)"
        return {str(k): describe(x, depth + 1) for k, x in list(v.items())[:40]}
    if isinstance(v, (list, tuple)):
        return f"{type(v).__name__}[{len(v)}]"
    return f"{type(v).__name__}: {str(v)[:80]}"


def pt_summary(path):
    import torch

    obj = torch.load(path, map_location="cpu", weights_only=False)
    print(json.dumps(describe(obj), indent=1))


if __name__ == "__main__":
    {"zip": zip_entries, "st-header": st_header, "pt-summary": pt_summary}[sys.argv[1]](sys.argv[2])
