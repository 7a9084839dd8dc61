"""Reading the capture's per-request dumps (`<rid>.safetensors`) with the standard library.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON (a map from
tensor name to {"dtype", "shape", "data_offsets": [begin, end]} relative to the end of the
header, plus an optional "__metadata__" map of strings), then the raw little-endian data, which
the offsets must cover exactly, without holes or overlaps (the safetensors format spec,
huggingface/safetensors README "Format"). Only the header is parsed here: the tensor bytes stay
on disk and are streamed by the converter (py/aerie_hs/ckpt.py), so a dump of any size costs
the reader a few kilobytes.

What aerie's capture writes (scratch/COMMON.md, "Wave 2"): `aux_hidden_state` BF16 [T, 3H] (the
three aux layers concatenated in capture order), `hidden_state` BF16 [T, H] (final, post-norm),
and `__metadata__` {"format": "aerie-hs/1", "rid", "tokens": "T", "aux_layers": "[..]",
"tp_rank": "0", "input_ids_sha256": sha256 of the int64 little-endian ids}.
"""
import hashlib
import json
import os
import struct

FORMAT = "aerie-hs/1"
# The safetensors reference reader refuses headers above 100 MB; a dump's is a few hundred bytes.
MAX_HEADER = 100 * 1000 * 1000
ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


class DumpError(Exception):
    """A dump that cannot become a SpecForge record; the message names what disagrees."""


class Tensor(object):
    __slots__ = ("name", "dtype", "shape", "begin", "end")

    def __init__(self, name, dtype, shape, begin, end):
        self.name, self.dtype, self.shape, self.begin, self.end = name, dtype, tuple(shape), begin, end

    @property
    def nbytes(self):
        return self.end - self.begin


class Dump(object):
    """A dump's header: its tensors (offsets absolute in the file) and metadata."""

    def __init__(self, path, tensors, metadata, size):
        self.path, self.tensors, self.metadata, self.size = path, tensors, metadata, size


def ids_sha256(ids):
    """sha256 of the ids as int64 little-endian, the digest the capture stores."""
    return hashlib.sha256(struct.pack("<%dq" % len(ids), *ids)).hexdigest()


def read_header(path):
    """Parse and structurally check a dump's header; raises DumpError."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) < 8:
            raise DumpError("%s: %d bytes, shorter than a safetensors header length" % (path, size))
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER or 8 + n > size:
            raise DumpError("%s: header length %d does not fit a file of %d bytes (truncated or not safetensors)" % (path, n, size))
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise DumpError("%s: header is not JSON: %s" % (path, e))
    if not isinstance(header, dict):
        raise DumpError("%s: header is a JSON %s, not an object" % (path, type(header).__name__))
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise DumpError("%s: __metadata__ must map names to strings" % path)
    base = 8 + n
    tensors, spans = {}, []
    for name, t in header.items():
        try:
            dtype, shape, (b, e) = t["dtype"], [int(d) for d in t["shape"]], t["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise DumpError("%s: tensor %r lacks dtype/shape/data_offsets" % (path, name))
        numel = 1
        for d in shape:
            numel *= d
        if dtype not in ITEMSIZE or e - b != numel * ITEMSIZE[dtype] or b < 0:
            raise DumpError("%s: tensor %r %s %s spans bytes [%d, %d), not its %s bytes"
                            % (path, name, dtype, shape, b, e, numel * ITEMSIZE.get(dtype, 0) if dtype in ITEMSIZE else "?"))
        tensors[name] = Tensor(name, dtype, shape, base + b, base + e)
        spans.append((b, e))
    at = 0
    for b, e in sorted(spans):
        if b != at:
            raise DumpError("%s: tensor data %s at byte %d of the data (holes or overlaps)" % (path, "overlaps" if b < at else "leaves a hole", b))
        at = e
    if base + at != size:
        raise DumpError("%s: data ends at byte %d but the file has %d (truncated, or written while being read)" % (path, base + at, size))
    return Dump(path, tensors, meta, size)


def check_dump(dump, ids, hidden=None):
    """Check a dump against the sample's ids (and the hidden size once known); returns H.

    Each check is a way a capture goes wrong: a chunked prefill stitched short of the last
    chunk, a second TP rank writing its own file, a capture that missed the final norm's
    output, a request id reused for another prompt.
    """
    p, meta, t = dump.path, dump.metadata, len(ids)
    if meta.get("format") != FORMAT:
        raise DumpError("%s: __metadata__.format is %r, not %r (not written by aerie's capture)" % (p, meta.get("format"), FORMAT))
    if meta.get("tp_rank", "0") != "0":
        raise DumpError("%s: written by tp_rank %s; only rank 0's dump is read (each rank holds the full hidden states, one file per request is expected)" % (p, meta.get("tp_rank")))
    aux, last = dump.tensors.get("aux_hidden_state"), dump.tensors.get("hidden_state")
    if last is None:
        raise DumpError("%s: no hidden_state tensor (the final post-norm state was not captured); tensors: %s" % (p, sorted(dump.tensors)))
    if aux is None:
        raise DumpError("%s: no aux_hidden_state tensor; tensors: %s" % (p, sorted(dump.tensors)))
    for x in (aux, last):
        if x.dtype != "BF16" or len(x.shape) != 2:
            raise DumpError("%s: %s is %s %s; expected BF16 [T, *]" % (p, x.name, x.dtype, list(x.shape)))
    rows = (aux.shape[0], last.shape[0])
    if rows != (t, t):
        short = " (short by one token: the last prompt token's state is missing)" if min(rows) == t - 1 else ""
        raise DumpError("%s: aux_hidden_state has %d tokens and hidden_state %d, the sample's ids %d%s" % (p, rows[0], rows[1], t, short))
    if meta.get("tokens") != str(t):
        raise DumpError("%s: __metadata__.tokens is %s, the sample's ids %d" % (p, meta.get("tokens"), t))
    try:
        layers = json.loads(meta.get("aux_layers", ""))
    except ValueError:
        layers = None
    if not (isinstance(layers, list) and len(layers) == 3 and all(isinstance(x, int) for x in layers)):
        raise DumpError("%s: __metadata__.aux_layers is %r; EAGLE-3 takes three layer ids" % (p, meta.get("aux_layers")))
    h = last.shape[1]
    if aux.shape[1] != 3 * h:
        raise DumpError("%s: aux_hidden_state width %d is not 3 × hidden_state width %d" % (p, aux.shape[1], h))
    if hidden is not None and h != hidden:
        raise DumpError("%s: hidden size %d, but %d expected (earlier samples or --hidden-size)" % (p, h, hidden))
    want = ids_sha256(ids)
    if meta.get("input_ids_sha256") != want:
        raise DumpError("%s: __metadata__.input_ids_sha256 %s is not the sha256 of the sample's ids %s (the dump is of another prompt)"
                        % (p, meta.get("input_ids_sha256"), want))
    return h


def ids_rows(path, fields):
    """Each non-blank line of an ids.jsonl (aerie_hs.tokens' output) as (line number, id, {field: [int]}, problem).

    problem is None for a usable row, ("rejected", why) for a sample the tokenizer refused (its
    {"id", "error"} line), or a string for a line that is no such row at all (id None then).
    """
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if isinstance(row, dict) and "error" in row:
                    yield n, row.get("id"), None, ("rejected", "tokenization failed (%s line %d): %s" % (path, n, row["error"]))
                    continue
                yield n, str(row["id"]), {k: [int(x) for x in row[k]] for k in fields}, None
            except (ValueError, KeyError, TypeError) as e:
                keys = ", ".join('"%s"' % k for k in ("id",) + tuple(fields))
                yield n, None, None, "%s line %d: not {%s}: %s" % (path, n, keys, e)
