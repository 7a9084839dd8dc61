"""The files aerie_hs.hf_extract writes and finds: SpecForge's data_<i>.ckpt (temp name, rename),
the check that a relaunch may skip one, the sweep of an interrupted launch's leftovers, and the
samples kept for aerie_hs.selfcheck.
"""
import json
import os
import re
import struct
import zipfile

from .capture import input_ids_sha256, write_safetensors
from .capture import FORMAT as DUMP_FORMAT
from .ckpt import feature_layout, verify_features
from .safetensors_dump import DumpError
from .torch_save import ALIGN, TorchZip, feature_pickle

_DATA = re.compile(r"^data_(\d+)\.ckpt$")
_TMP = re.compile(r"^\.data_\d+\.ckpt\.\d+\.tmp$")


def write_json_atomic(path, obj):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def bf16_raw(torch, x):
    return x.detach().to("cpu", torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()


def write_ckpt(final_path, ids, mask, aux_raw, hid_raw, hidden):
    """SpecForge's record (ckpt.py's key order and shapes) with torch_save's writer: temp name, rename."""
    t = len(ids)
    stem = os.path.basename(final_path).rsplit(".", 1)[0]
    tmp = os.path.join(os.path.dirname(final_path), ".%s.%d.tmp" % (os.path.basename(final_path), os.getpid()))
    try:
        with open(tmp, "wb", buffering=0) as f:
            z = TorchZip(f, stem)
            z.add("data.pkl", feature_pickle(feature_layout(t, hidden)))
            z.add(".format_version", b"1")
            z.add(".storage_alignment", str(ALIGN).encode())
            z.add("byteorder", b"little")
            z.add("data/0", struct.pack("<%dq" % t, *ids))
            z.add("data/1", struct.pack("<%dq" % t, *mask))
            z.add("data/2", aux_raw)
            z.add("data/3", hid_raw)
            z.finish()
            os.fsync(f.fileno())
        size = z.pos
        os.replace(tmp, final_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return size


def complete(path, ids, mask, hidden):
    """The file in place is this sample's, whole (a relaunch skips it)."""
    if not os.path.exists(path):
        return False
    try:
        return verify_features(path, ids, mask) == hidden
    except (DumpError, OSError, ValueError, KeyError, struct.error, zipfile.BadZipFile):
        return False


def sweep_tmp(out):
    """Temp files of an interrupted launch: never a sample's file, removed."""
    for root, _dirs, files in os.walk(out):
        for name in files:
            if _TMP.match(name) or name.endswith(".tmp"):
                try:
                    os.unlink(os.path.join(root, name))
                except FileNotFoundError:
                    pass


def stale_files(out, count):
    """data_<i>.ckpt at or beyond this dataset's sample count: an earlier dataset's, removed."""
    gone = 0
    for root, _dirs, files in os.walk(out):
        for name in files:
            m = _DATA.match(name)
            if m and int(m.group(1)) >= count:
                os.unlink(os.path.join(root, name))
                gone += 1
    return gone


def picks_for(total, early, final):
    """Sample numbers kept for the self-check: the first `early`, then a spread up to `final` (samples.ts selfCheckPicks)."""
    first = list(range(min(early, total)))
    picked = set(first)
    rest, more = total - len(first), max(0, final - len(first))
    n = min(more, rest)
    if n > 0:
        step = rest / n
        for k in range(n):
            picked.add(len(first) + int(k * step))
    return picked


def keep_for_selfcheck(out, sid, ids, mask, aux_raw, hid_raw, hidden, capture_ids, greedy_next):
    """The dump and row aerie_hs.selfcheck reads (src/stages/extract/selfcheck.ts's layout), each atomically."""
    d = os.path.join(out, "selfcheck")
    os.makedirs(os.path.join(d, "dumps"), exist_ok=True)
    os.makedirs(os.path.join(d, "rows"), exist_ok=True)
    t = len(ids)
    meta = {"format": DUMP_FORMAT, "rid": sid, "tokens": str(t), "aux_layers": json.dumps(list(capture_ids)),
            "tp_rank": "0", "input_ids_sha256": input_ids_sha256(ids), "producer": "aerie_hs.hf_extract"}
    write_safetensors(os.path.join(d, "dumps", sid + ".safetensors"), {
        "aux_hidden_state": ("BF16", [t, len(capture_ids) * hidden], aux_raw),
        "hidden_state": ("BF16", [t, hidden], hid_raw),
    }, meta)
    write_json_atomic(os.path.join(d, "rows", sid + ".json"),
                      {"id": sid, "input_ids": ids, "loss_mask": mask, "greedy_next": int(greedy_next)})
