"""The capture's pure parts: layer-id mapping, chunk stitching and the dump writer.

Stdlib only, so the stitching and the file format are tested without torch; torch is
imported lazily by the two functions that take tensors (`bf16_bytes`, `capture_from_hf`).
The dump format (COMMON.md "Wave 2"): one `<rid>.safetensors` per request holding
`aux_hidden_state` BF16 [T, 3H] (capture order), `hidden_state` BF16 [T, H] (final,
post-norm) and `__metadata__` {"format": "aerie-hs/1", ...}, written under `.tmp` and
renamed so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import re
import struct
from typing import Dict, Iterable, List, Optional, Sequence

from .safetensors_dump import ids_sha256

FORMAT = "aerie-hs/1"
_RID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class CaptureError(ValueError):
    """A capture that cannot become a complete, correct dump."""


def specforge_default_aux_layers(num_layers: int) -> List[int]:
    # SpecForge@a6b6b023:specforge/algorithms/model_providers.py:204
    return [1, num_layers // 2 - 1, num_layers - 4]


def sglang_default_capture_ids(num_layers: int) -> List[int]:
    # sglang==0.5.23:sglang/srt/models/llama.py:936 (and 0.5.12:llama.py:805,
    # deepseek_v2.py:2536): with no ids given, capture at the input of these layers.
    return [2, num_layers // 2, num_layers - 3]


def sglang_capture_ids(draft_layer_ids: Sequence[int], num_layers: int) -> List[int]:
    """The SGLang capture points (layer-input ids) for a draft config's layer ids.

    SGLang stores hidden + residual at the input of layer id+1, which is layer id's
    output (sglang==0.5.23:sglang/srt/models/llama.py:939-941). The last layer has no
    successor, so its output cannot be captured there.
    """
    ids = [int(i) + 1 for i in draft_layer_ids]
    bad = [i - 1 for i in ids if i < 1 or i >= num_layers]
    if bad:
        raise CaptureError(
            f"aux layer ids {bad} cannot be captured on a {num_layers}-layer target: "
            f"a draft layer id must lie in 0..{num_layers - 2} (SGLang captures layer "
            "id's output at the input of layer id+1)")
    return ids


def draft_layer_ids(capture_ids: Sequence[int]) -> List[int]:
    return [int(i) - 1 for i in capture_ids]


def input_ids_sha256(ids: Iterable[int]) -> str:
    # the one digest definition is the dump reader's, so writer and reader cannot drift apart
    return ids_sha256([int(i) for i in ids])


def bf16_bytes(x) -> bytes:
    """Raw little-endian BF16 bytes of a 2-D piece: bytes pass through, tensors convert."""
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    import torch  # only the hook and the HF capture hand tensors in

    t = x.detach().to("cpu", torch.bfloat16).contiguous()
    return t.view(torch.int16).numpy().tobytes()


def write_safetensors(path: str, tensors: Dict[str, tuple], metadata: Dict[str, str]) -> None:
    """Write `{name: (dtype, shape, bytes)}` as safetensors under `path.tmp`, then rename."""
    header: Dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the format asks the data to start 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for _, (_, _, data) in tensors.items():
            f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class _Pending:
    __slots__ = ("ids", "received", "aux", "hidden")

    def __init__(self, ids: List[int]):
        self.ids = ids
        self.received = 0
        self.aux: List[bytes] = []
        self.hidden: List[bytes] = []


class CaptureBuffer:
    """Stitches a request's prefill pieces in order and writes its dump once complete.

    Pieces come from the scheduler as it processes each prefill batch: (rid, the full
    prompt ids, the piece's offset in the prompt, its aux rows, its final rows). A
    request's first piece must start at 0 (anything else means the radix cache served a
    prefix whose states were never computed) and each next piece where the last ended.
    Only tp_rank 0 keeps or writes anything: every TP rank sees the same replicated
    states, and one writer per file is what makes the rename the only visibility event.
    """

    def __init__(self, out_dir: str, aux_layers: Sequence[int], hidden_size: int,
                 tp_rank: int = 0):
        self.out_dir = out_dir
        self.aux_layers = [int(i) for i in aux_layers]
        self.hidden_size = int(hidden_size)
        self.tp_rank = int(tp_rank)
        self._pending: Dict[str, _Pending] = {}

    @property
    def writer(self) -> bool:
        return self.tp_rank == 0

    def pending(self) -> Dict[str, int]:
        """rid -> tokens received so far, for requests not yet written."""
        return {rid: p.received for rid, p in self._pending.items()}

    def add(self, rid: str, input_ids: Sequence[int], offset: int, aux, hidden) -> Optional[str]:
        """Take one piece; return the dump's path when this piece completed the request."""
        if not self.writer:
            return None
        if not isinstance(rid, str) or not _RID.match(rid):
            raise CaptureError(f"rid {rid!r} cannot name a dump file: use [A-Za-z0-9._-], "
                               "at most 200 characters, not starting with '.' or '-'")
        H, K = self.hidden_size, len(self.aux_layers)
        aux_b, hid_b = bf16_bytes(aux), bf16_bytes(hidden)
        if len(hid_b) % (2 * H):
            raise CaptureError(f"rid {rid}: final-state piece of {len(hid_b)} bytes is not "
                               f"whole rows of hidden size {H}")
        n = len(hid_b) // (2 * H)
        if len(aux_b) != n * 2 * H * K:
            raise CaptureError(f"rid {rid}: aux piece holds {len(aux_b) // 2} values, expected "
                               f"{n} rows x {K} layers x {H}")
        p = self._pending.get(rid)
        if p is None:
            if offset != 0:
                raise CaptureError(
                    f"rid {rid}: first piece starts at token {offset}, not 0: the prefix came "
                    "from the radix cache and its states were never computed (launch with "
                    "--disable-radix-cache), or an earlier piece was lost")
            p = self._pending[rid] = _Pending([int(i) for i in input_ids])
        elif list(map(int, input_ids)) != p.ids:
            self._pending.pop(rid)
            raise CaptureError(f"rid {rid}: a piece carries other input ids than the first: "
                               "two live requests share this rid")
        T = len(p.ids)
        if offset != p.received:
            self._pending.pop(rid)
            kind = "overlaps" if offset < p.received else "leaves a gap after"
            raise CaptureError(f"rid {rid}: piece at token {offset} {kind} the {p.received} "
                               "tokens already stitched; chunks must arrive in order")
        if offset + n > T:
            self._pending.pop(rid)
            raise CaptureError(f"rid {rid}: piece [{offset}, {offset + n}) runs past the "
                               f"prompt's {T} tokens")
        p.aux.append(aux_b)
        p.hidden.append(hid_b)
        p.received += n
        if p.received < T:
            return None
        del self._pending[rid]
        return self._write(rid, p)

    def drop(self, rid: str) -> bool:
        """Forget an unfinished request (aborted or retracted); nothing is written."""
        return self._pending.pop(rid, None) is not None

    def _write(self, rid: str, p: _Pending) -> str:
        T, H, K = len(p.ids), self.hidden_size, len(self.aux_layers)
        meta = {"format": FORMAT, "rid": rid, "tokens": str(T),
                "aux_layers": json.dumps(self.aux_layers), "tp_rank": str(self.tp_rank),
                "input_ids_sha256": input_ids_sha256(p.ids)}
        path = os.path.join(self.out_dir, rid + ".safetensors")
        write_safetensors(path, {
            "aux_hidden_state": ("BF16", [T, K * H], b"".join(p.aux)),
            "hidden_state": ("BF16", [T, H], b"".join(p.hidden)),
        }, meta)
        return path


def capture_from_hf(model, input_ids, capture_ids: Sequence[int]):
    """The dump's two tensors for one prompt, from a transformers Llama-style model.

    Captures what SGLang captures: the residual stream at the input of each layer in
    `capture_ids` (SGLang ids: draft id + 1) via forward pre-hooks, and the final norm's
    output, via a forward hook on `model.model.norm`. Returns (aux [T, K*H], final [T, H])
    in the model's dtype; `input_ids` is a 1-D sequence or a [1, T] tensor.
    """
    import torch

    inner = model.model
    layers = inner.layers
    L = len(layers)
    bad = [c for c in capture_ids if not 0 <= int(c) < L]
    if bad:
        raise CaptureError(f"capture ids {bad} lie outside the model's layers 0..{L - 1}")
    got: Dict[int, torch.Tensor] = {}
    final: List[torch.Tensor] = []
    handles = []

    def pre_hook(idx):
        def hook(_module, args, kwargs):
            h = args[0] if args else kwargs["hidden_states"]
            got[idx] = h.detach()
        return hook

    for c in sorted(set(int(c) for c in capture_ids)):
        handles.append(layers[c].register_forward_pre_hook(pre_hook(c), with_kwargs=True))
    handles.append(inner.norm.register_forward_hook(
        lambda _m, _a, out: final.append(out.detach())))
    try:
        ids = torch.as_tensor(input_ids, dtype=torch.long).reshape(1, -1)
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    if len(final) != 1:
        raise CaptureError(f"the final norm ran {len(final)} times in one forward, expected once")
    aux = torch.cat([got[int(c)][0] for c in capture_ids], dim=-1)
    return aux, final[0][0]
