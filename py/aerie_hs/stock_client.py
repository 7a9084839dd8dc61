"""The stock-SGLang producer's client: hidden states over HTTP from an unpatched 0.5.23 server.

Runs on the GPU host next to the server (the states are JSON floats, ~10x their bf16 size: they
never cross the SSH link), standard library only:

  python -m aerie_hs.stock_client --port P --ids ids.jsonl --dumps DIR --pass aux --aux-layers "[2, 8, 14]"
  python -m aerie_hs.stock_client --port P --ids ids.jsonl --dumps DIR --pass final [--greedy greedy.jsonl]

A 0.5.23 server returns either the aux states or the final one, never both (py/aerie_hs/CAPTURE.md
"Stock path"): with --enable-return-aux-hidden-states the rows it returns are the aux
concatenation in place of the last-layer state (sglang==0.5.23:sglang/srt/layers/logits_processor.py:868-869),
with --enable-return-hidden-states alone they are the final post-norm state (:870-871). So each
sample takes two passes, one per server launch: `--pass aux` writes `<rid>.aux.partial` (aux
[T, 3H]), `--pass final` `<rid>.final.partial` ([T, H]); whichever pass finds the other's partial
merges both into `<rid>.safetensors` (aerie-hs/1, the capture's format: py/aerie_hs/capture.py)
and deletes the partials. Every file appears by rename only; run the passes one after the
other (two at once could both merge a sample through the same temp name). A sample that fails gets
`<rid>.error.json` {"format", "rid", "error"}, as the patched path's capture writes.

Requests (sglang==0.5.23:sglang/srt/managers/io_struct.py:260-262 `return_hidden_states`):
POST /generate {"input_ids", "rid", "return_hidden_states": true, "sampling_params":
{"max_new_tokens": 1, "temperature": 0}}. Response: meta_info.prompt_tokens
(sglang==0.5.23:sglang/srt/managers/tokenizer_manager.py:2510) must equal len(input_ids);
meta_info.hidden_states (tokenizer_manager.py:2598-2601) holds one list per forward that stored
rows: the prefill's [T rows] first (scheduler_components/batch_result_processor.py:652-659),
decode rows after (:698-701). Fewer than T prefill rows means a chunked prefill (middle chunks are
not stored) or a radix-cache hit: the server needs --chunked-prefill-size -1 --disable-radix-cache.
Errors come back as HTTP 400 {"error": {"message"}} (sglang==0.5.23:sglang/srt/entrypoints/http_server.py:2246-2250).

stdout, one line per sample in file order: `PART <id> <pass> <tokens>`, `OK <id> <tokens>` (the
dump is complete), `SKIP <id>[ <pass>]`, `FAIL <id>\t<why>`, `REJECTED <id>\t<why>`, then
`END ...`. Exit 0, 1 when a sample failed, 2 usage, 3 server unreachable (no error files then:
nothing was learnt about the samples).
"""
import argparse
import json
import os
import struct
import sys
import urllib.error
import urllib.request
from array import array
from collections import deque
from concurrent.futures import ThreadPoolExecutor

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from aerie_hs.capture import _RID, FORMAT, write_safetensors  # noqa: E402
from aerie_hs.safetensors_dump import DumpError, ids_rows, ids_sha256, read_header  # noqa: E402

PASSES = {"aux": "aux_hidden_state", "final": "hidden_state"}
PART_FORMAT = FORMAT + "-part"


class SampleError(Exception):
    """This sample cannot be captured; the message names what disagrees."""


class Unreachable(Exception):
    """The server did not answer: nothing is known about the sample."""


def bf16_bytes(values):
    """JSON floats as little-endian BF16. A bf16 server's values convert exactly; others are
    rounded to nearest even, as torch's .to(torch.bfloat16) does."""
    try:
        f32 = array("f", values)
    except TypeError:
        raise SampleError("a hidden-state value is not a number (a NaN or inf is sent as null)")
    if sys.byteorder != "little":
        f32.byteswap()
    words = memoryview(f32.tobytes()).cast("H")
    low, high = words[0::2].tobytes(), words[1::2].tobytes()
    if low.count(0) == len(low):
        return high
    out = array("H")
    for (x,) in struct.iter_unpack("<I", f32.tobytes()):
        if (x & 0x7F800000) == 0x7F800000 and x & 0x7FFFFF:
            out.append((x >> 16) | 0x40)  # NaN stays a quiet NaN
        else:
            out.append(((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF)
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def rows_of(body, rid, ids, which):
    """The prefill's rows from a /generate response body, checked; returns (width, rows)."""
    t = len(ids)
    meta = body.get("meta_info") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        raise SampleError("the response has no meta_info: %r" % (str(body)[:200],))
    if meta.get("id", rid) != rid:
        raise SampleError("the response is for rid %r" % meta.get("id"))
    if meta.get("prompt_tokens") != t:
        raise SampleError("the server counted %r prompt tokens, the sample has %d (ids changed on the way?)" % (meta.get("prompt_tokens"), t))
    hs = meta.get("hidden_states")
    flag = "--enable-return-aux-hidden-states" if which == "aux" else "--enable-return-hidden-states (without the aux flag)"
    if not isinstance(hs, list) or not hs or not isinstance(hs[0], list) or not hs[0]:
        raise SampleError("no meta_info.hidden_states rows: the %s pass needs a server launched with %s" % (which, flag))
    rows = hs[0]
    if not isinstance(rows[0], list):
        raise SampleError("meta_info.hidden_states holds one row, not one per token: the server returns only the last token's state (return-hidden-states-mode last)")
    if len(rows) != t:
        raise SampleError("%d prefill rows for %d prompt tokens: launch with --chunked-prefill-size -1 (middle chunks are not returned) "
                          "and --disable-radix-cache (a cached prefix has no rows)" % (len(rows), t))
    width = len(rows[0])
    for r, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != width:
            raise SampleError("row %d has %s values, row 0 has %d" % (r, len(row) if isinstance(row, list) else "no", width))
    return width, rows


class Client(object):
    def __init__(self, a, log):
        self.a, self.log = a, log
        self.url = "http://%s:%d/generate" % (a.host, a.port)
        self.other = "final" if a.which == "aux" else "aux"
        self.counts = {"parts": 0, "dumps": 0, "skipped": 0, "failed": 0, "rejected": 0}

    def path(self, rid, suffix):
        return os.path.join(self.a.dumps, rid + suffix)

    def post(self, rid, ids):
        req = {"input_ids": ids, "rid": rid, "return_hidden_states": True,
               "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
        r = urllib.request.Request(self.url, data=json.dumps(req).encode(), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(r, timeout=self.a.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw).get("error")
                msg = err.get("message") if isinstance(err, dict) else err
            except (ValueError, AttributeError):
                msg = raw[:300].decode("utf-8", "replace")
            raise SampleError("the server refused the request (HTTP %d): %s" % (e.code, msg))
        except (urllib.error.URLError, OSError) as e:
            raise Unreachable("%s: %s" % (self.url, getattr(e, "reason", e)))
        try:
            return json.loads(raw)
        except ValueError as e:
            raise SampleError("the response is not JSON: %s" % e)

    def merge_only(self, rid, ids):
        self.merge(rid, ids)
        return "OK %s %d" % (rid, len(ids)), None

    def one(self, rid, ids):
        """Runs on a worker thread: one request, this pass's partial, and the merge if it can."""
        which, other = self.a.which, self.other
        body = self.post(rid, ids)
        width, rows = rows_of(body, rid, ids, which)
        h = self.a.hidden_size
        if which == "aux" and (width % 3 or (h is not None and width != 3 * h)):
            raise SampleError("aux rows are %d wide: not 3 x hidden size %s (is this server the final-state one?)" % (width, h or "H"))
        if which == "final" and h is not None and width != h:
            raise SampleError("final rows are %d wide, hidden size is %d (is this server the aux one, launched with --enable-return-aux-hidden-states?)" % (width, h))
        flat = [x for row in rows for x in row]
        meta = {"format": PART_FORMAT, "rid": rid, "pass": which, "tokens": str(len(ids)), "tp_rank": "0",
                "input_ids_sha256": ids_sha256(ids)}
        if which == "aux":
            meta["aux_layers"] = json.dumps(self.a.aux_layers)
        write_safetensors(self.path(rid, ".%s.partial" % which), {PASSES[which]: ("BF16", [len(ids), width], bf16_bytes(flat))}, meta)
        out = body.get("output_ids")
        greedy = out[0] if isinstance(out, list) and out else None
        if not os.path.exists(self.path(rid, ".%s.partial" % other)):
            return "PART %s %s %d" % (rid, which, len(ids)), greedy
        self.merge(rid, ids)
        return "OK %s %d" % (rid, len(ids)), greedy

    def merge(self, rid, ids):
        parts, want = {}, ids_sha256(ids)
        for which, name in PASSES.items():
            d = read_header(self.path(rid, ".%s.partial" % which))
            m, x = d.metadata, d.tensors.get(name)
            if m.get("format") != PART_FORMAT or m.get("input_ids_sha256") != want or x is None or x.shape[0] != len(ids):
                raise SampleError("%s is not this sample's %s pass (format %r, sha %s, tensors %s): delete it and run that pass again"
                                  % (d.path, which, m.get("format"), m.get("input_ids_sha256"), sorted(d.tensors)))
            with open(d.path, "rb") as f:
                f.seek(x.begin)
                parts[name] = (x.shape, f.read(x.nbytes), m)
        (aux_shape, aux, aux_meta), (fin_shape, fin, _) = parts["aux_hidden_state"], parts["hidden_state"]
        if aux_shape[1] != 3 * fin_shape[1]:
            raise SampleError("aux rows are %d wide but final rows %d: not 3 x H (were the two servers swapped?)" % (aux_shape[1], fin_shape[1]))
        meta = {"format": FORMAT, "rid": rid, "tokens": str(len(ids)), "aux_layers": aux_meta.get("aux_layers", ""),
                "tp_rank": "0", "input_ids_sha256": want}
        write_safetensors(self.path(rid, ".safetensors"), {"aux_hidden_state": ("BF16", list(aux_shape), aux),
                                                           "hidden_state": ("BF16", list(fin_shape), fin)}, meta)
        self.drop_partials(rid)

    def drop_partials(self, rid):
        for which in PASSES:
            try:
                os.unlink(self.path(rid, ".%s.partial" % which))
            except FileNotFoundError:
                pass

    def fail(self, rid, why):
        self.counts["failed"] += 1
        if isinstance(rid, str) and _RID.match(rid):
            path = self.path(rid, ".error.json")
            with open(path + ".tmp", "w") as f:
                json.dump({"format": FORMAT, "rid": rid, "error": why}, f)
            os.replace(path + ".tmp", path)
        self.log("FAIL %s\t%s" % (rid, why))

    def run(self):
        a, pending, dead = self.a, deque(), None
        greedy = open(a.greedy, "a") if a.greedy else None
        with ThreadPoolExecutor(a.concurrency) as pool:
            def settle(rid, fut):
                nonlocal dead
                try:
                    line, g = fut.result()
                except Unreachable as e:
                    dead = dead or str(e)
                    return
                except (SampleError, DumpError, OSError) as e:
                    return self.fail(rid, str(e))
                self.counts["dumps" if line.startswith("OK ") else "parts"] += 1
                err = self.path(rid, ".error.json")
                if os.path.exists(err):
                    os.unlink(err)  # an earlier run's failure, now captured
                if greedy is not None and g is not None:
                    greedy.write(json.dumps({"id": rid, "greedy_next": g}) + "\n")
                self.log(line)
            for rid, ids, err in samples(a.ids):
                if dead:
                    break
                if err is not None:
                    self.counts["rejected" if rid is not None else "failed"] += 1
                    self.log("%s %s\t%s" % ("REJECTED" if rid is not None else "FAIL", rid, err))
                    continue
                if not _RID.match(rid):
                    self.fail(rid, "sample id %r cannot name a file (letters, digits, . _ - only)" % rid)
                    continue
                mine, theirs = (os.path.exists(self.path(rid, ".%s.partial" % w)) for w in (a.which, self.other))
                if os.path.exists(self.path(rid, ".safetensors")):
                    self.drop_partials(rid)  # a merge that died before its clean-up
                    self.counts["skipped"] += 1
                    self.log("SKIP %s" % rid)
                    continue
                if mine and not theirs:
                    self.counts["skipped"] += 1
                    self.log("SKIP %s %s" % (rid, a.which))
                    continue
                # both partials there: an earlier merge failed or died; no request needed
                pending.append((rid, pool.submit(self.merge_only if mine else self.one, rid, ids)))
                while pending and (len(pending) > 2 * a.concurrency or pending[0][1].done()):
                    settle(*pending.popleft())
            while pending:
                settle(*pending.popleft())
        if greedy is not None:
            greedy.close()
        if dead:
            self.log("ABORT\tthe server stopped answering: %s" % dead)
        self.log("END parts=%(parts)d dumps=%(dumps)d skipped=%(skipped)d failed=%(failed)d rejected=%(rejected)d" % self.counts)
        return 3 if dead else 1 if self.counts["failed"] else 0


def samples(path):
    """(id, input_ids, None) per line, or (id, None, why): a tokenizer's error line is (id, None, why)."""
    for _, sid, got, problem in ids_rows(path, ("input_ids",)):
        if problem is None:
            yield sid, got["input_ids"], None
        elif isinstance(problem, tuple):
            yield str(sid), None, problem[1]
        else:
            yield None, None, problem


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m aerie_hs.stock_client")
    ap.add_argument("--port", type=int, required=True, help="the SGLang server's port")
    ap.add_argument("--host", default="127.0.0.1", help="the address the server listens on, as this host reaches it (its --host)")
    ap.add_argument("--ids", required=True, help='JSONL, one {"id", "input_ids"} per sample (aerie_hs.tokens writes it)')
    ap.add_argument("--dumps", required=True, help="folder for <id>.safetensors (exists)")
    ap.add_argument("--pass", dest="which", choices=sorted(PASSES), required=True,
                    help="aux: a server with --enable-return-aux-hidden-states; final: one with --enable-return-hidden-states")
    ap.add_argument("--aux-layers", default=None, help="JSON list of the SGLang capture ids the aux server takes (recorded in each dump); --pass aux only")
    ap.add_argument("--hidden-size", type=int, default=None, help="refuse rows of another width")
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight (each response holds T x width floats as JSON)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one request may take")
    ap.add_argument("--greedy", default=None, help='append {"id", "greedy_next"} rows here (output_ids[0], for aerie_hs.selfcheck)')
    a = ap.parse_args(argv)
    if a.which == "aux":
        try:
            a.aux_layers = json.loads(a.aux_layers or "")
        except ValueError:
            a.aux_layers = None
        if not (isinstance(a.aux_layers, list) and len(a.aux_layers) == 3 and all(isinstance(x, int) for x in a.aux_layers)):
            ap.error("--pass aux needs --aux-layers, the three SGLang capture ids as JSON, e.g. \"[2, 8, 14]\"")
    if a.concurrency <= 0:
        ap.error("--concurrency must be > 0")
    if not os.path.isdir(a.dumps) or not os.path.isfile(a.ids):
        ap.error("--dumps must be a folder and --ids a file (got %s, %s)" % (a.dumps, a.ids))
    return Client(a, lambda s: (sys.stdout.write(s + "\n"), sys.stdout.flush())).run()


if __name__ == "__main__":
    sys.exit(main())
