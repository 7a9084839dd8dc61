"""SpecForge's offline feature files, written without torch (Python standard library only).

`python -m aerie_hs.ckpt convert --dumps DIR --ids ids.jsonl --out OUT --file-group-size G`
turns the capture's `<rid>.safetensors` dumps (py/aerie_hs/safetensors_dump.py) into
`OUT/rows_<g>-<g+G>/data_<i>.ckpt`, the layout prepare_hidden_states.py leaves
(SpecForge@a6b6b023:scripts/prepare_hidden_states.py:578-594: g = i // G * G), plus
`OUT/index.jsonl` ({"i", "id", "tokens"} per line) from file index to sample id. aerie runs it
serially, once per batch, `--ids` holding that batch only: the index appends across runs, so `i`
keeps rising, and a sample already indexed with a good file is skipped. One stdout line per
sample: `OK <i> <id> <tokens> <bytes>`, `SKIP <i> <id>`, `REDO <i> <id>\t<why>` (then OK or
FAIL), `FAIL <id>\t<why>`, `MISSING <id>\t<why>`, `REJECTED <id>\t<why>`; then `END written=..
skipped=.. missing=.. rejected=.. failed=..`. `--remove-dumps` deletes a dump once its sample is
written and indexed, or skipped; a FAIL keeps it. `--threads N` (default min(4, CPUs)) files
are written at once; stdout and index.jsonl still come in `--ids` order (see _Converter).

Each file is what `torch.save(record, "data_<i>.ckpt")` writes with torch 2.13's defaults, byte
for byte (py/aerie_hs/torch_save.py says how).

The record's key order is SpecForge@a6b6b023's: input_ids, loss_mask (passthrough), then
aux_hidden_state, hidden_state (SpecForge@a6b6b023:scripts/prepare_hidden_states.py:402-410 with
specforge/algorithms/common/providers.py:458-465). Shapes: input_ids and loss_mask int64 [T] (cloned
rows, SpecForge@a6b6b023:scripts/prepare_hidden_states.py:719-726), states bf16 [1,T,*] (the
`.unsqueeze(0)` at :707-718). A dump's [T,H] bf16 rows are the same bytes as [1,T,H], so they are
copied into the entry without being decoded.
"""
import argparse
import json
import os
import re
import struct
import sys
import zipfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from aerie_hs.safetensors_dump import DumpError, check_dump, ids_rows, read_header  # noqa: E402
from aerie_hs.torch_save import ALIGN, TorchZip, feature_pickle  # noqa: E402

# Files written at once, one per worker thread, each copying through a 1 MiB buffer of its own
# (torch_save.TorchZip.copy): the RSS stays small whatever the dumps' size. Four reach 1.4-1.6x
# cp on the 16-core H200 host (bench/convert-rate.md); more would take cores from the server.
THREADS = max(1, min(4, os.cpu_count() or 1))


def feature_layout(t, h):
    return [("input_ids", "int64", (t,)), ("loss_mask", "int64", (t,)),
            ("aux_hidden_state", "bfloat16", (1, t, 3 * h)), ("hidden_state", "bfloat16", (1, t, h))]


def write_features(final, ids, mask, dump, fsync=False):
    """Write one record for dump under a temp name beside `final`, then rename it into place;
    returns the file's size in bytes."""
    tmp, size = _write_tmp(final, ids, mask, dump, fsync)
    os.replace(tmp, final)
    return size


def _write_tmp(final, ids, mask, dump, fsync):
    """The record, complete, under a hidden temp name beside `final`; returns that name and its
    size. Nothing is left on a failure. SpecForge's reader passes such a name by: it keeps only
    files ending in .ckpt or .ckpt.gz (SpecForge@a6b6b023:specforge/data/preprocessing.py:376-391)."""
    t, h = len(ids), dump.tensors["hidden_state"].shape[1]
    stem = os.path.basename(final).rsplit(".", 1)[0]
    tmp = os.path.join(os.path.dirname(final), ".%s.%d.tmp" % (os.path.basename(final), os.getpid()))
    try:
        with open(tmp, "wb", buffering=0) as f, open(dump.path, "rb", buffering=0) as raw:
            now = os.fstat(raw.fileno()).st_size
            if now != dump.size:
                raise DumpError("%s: changed size from %d to %d since its header was read" % (dump.path, dump.size, now))
            z = TorchZip(f, stem)
            z.add("data.pkl", feature_pickle(feature_layout(t, h)))
            z.add(".format_version", b"1")
            z.add(".storage_alignment", str(ALIGN).encode())
            z.add("byteorder", b"little")
            z.add("data/0", struct.pack("<%dq" % t, *ids))
            z.add("data/1", struct.pack("<%dq" % t, *mask))
            for k, name in ((2, "aux_hidden_state"), (3, "hidden_state")):
                x = dump.tensors[name]
                z.copy("data/%d" % k, raw.fileno(), x.begin, x.end)
            z.finish()
            if fsync:
                os.fsync(f.fileno())
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return tmp, z.pos


def verify_features(path, ids, mask):
    """A file already in place is this sample's, complete: its directory, data.pkl and ids agree."""
    with zipfile.ZipFile(path) as z:
        stem = os.path.basename(path).rsplit(".", 1)[0]
        infos = {i.filename: i for i in z.infolist()}
        hs = infos.get(stem + "/data/3")
        t = len(ids)
        if hs is None or t == 0 or hs.file_size % (2 * t):
            raise DumpError("%s: no hidden_state storage of whole rows" % path)
        h = hs.file_size // (2 * t)
        if z.read(stem + "/data.pkl") != feature_pickle(feature_layout(t, h)):
            raise DumpError("%s: data.pkl is not the record of %d tokens × hidden %d" % (path, t, h))
        if z.read(stem + "/data/0") != struct.pack("<%dq" % t, *ids) or z.read(stem + "/data/1") != struct.pack("<%dq" % t, *mask):
            raise DumpError("%s: input_ids or loss_mask differ from the sample's" % path)
        if infos.get(stem + "/data/2") is None or infos[stem + "/data/2"].file_size != 6 * t * h:
            raise DumpError("%s: aux_hidden_state storage is not %d bytes" % (path, 6 * t * h))
    return h


# ---- the converter -----------------------------------------------------------------------------

def group_dir(out, i, g):
    lo = i // g * g
    return os.path.join(out, "rows_%d-%d" % (lo, lo + g))


def _load_index(path):
    """index.jsonl's complete lines; a torn last line (a crash mid-append) is cut off first."""
    by_id, top = {}, -1
    if not os.path.exists(path):
        return by_id, top
    with open(path, "rb+") as f:
        raw = f.read()
        end = raw.rfind(b"\n") + 1
        if end != len(raw):
            f.truncate(end)
    for n, line in enumerate(raw[:end].splitlines(), 1):
        try:
            row = json.loads(line)
            i, sid = int(row["i"]), str(row["id"])
        except (ValueError, KeyError, TypeError):
            raise SystemExit("aerie_hs.ckpt: %s line %d is not an index row {\"i\", \"id\"}: %r" % (path, n, line[:200]))
        by_id[sid] = i
        top = max(top, i)
    return by_id, top


def _samples(path):
    for n, sid, got, problem in ids_rows(path, ("input_ids", "loss_mask")):
        if problem is not None:
            yield sid, None, None, problem
        elif len(got["input_ids"]) != len(got["loss_mask"]) or not got["input_ids"]:
            yield sid, None, None, "%s line %d: %d input_ids but %d loss_mask values" % (path, n, len(got["input_ids"]), len(got["loss_mask"]))
        else:
            yield sid, got["input_ids"], got["loss_mask"], None


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_TMP = re.compile(r"^\.data_\d+\.ckpt\.\d+\.tmp$")


class _Entry(object):
    """One sample's outcome, settled in file order: a line to log (and a dump to remove), or a
    file being written on a worker whose rename, index line and log wait their turn."""
    __slots__ = ("sample", "key", "lines", "dump", "future", "i", "new", "final", "ntok")

    def __init__(self, sample, key, lines, dump=None, future=None, i=None, new=False, final=None):
        self.sample, self.key, self.lines, self.dump, self.future = sample, key, lines, dump, future
        self.i, self.new, self.final = i, new, final

    def discard(self):
        """A written temp file that will not be published is deleted."""
        if self.future is not None:
            try:
                _remove(self.future.result()[0])
            except Exception:  # it failed, and _write_tmp left nothing
                pass


class _Converter(object):
    """The converter's bookkeeping on the main thread; the workers only write temp files.

    Samples are planned in file order (index reserved, dump header checked) and written by up
    to `threads` workers at once, each its own file: one file's writes serialize on its inode,
    so parallel files are what lets the converter keep up with `cp` (bench/convert-rate.md).
    Renames, index lines and log lines happen in file order, so index.jsonl and stdout read as
    a serial run's. A write that fails after later samples took the indices after it rewinds
    them: their temp files go and they are planned again, so `i` has no gaps."""

    def __init__(self, dumps, ids_path, out, group, start, hidden, fsync, log, remove_dumps, threads):
        self.dumps, self.ids_path, self.out, self.group = dumps, ids_path, out, group
        self.hidden, self.fsync, self.log, self.remove_dumps = hidden, fsync, log, remove_dumps
        self.threads = threads
        self.index_path = os.path.join(out, "index.jsonl")
        self.by_id, top = _load_index(self.index_path)
        self.nxt = max(start, top + 1)
        # rejected: lines the tokenizer already refused (counted there, not a conversion failure)
        self.counts = {"written": 0, "skipped": 0, "missing": 0, "rejected": 0, "failed": 0}
        self.seen, self.todo, self.queue = set(), deque(), deque()

    def _sweep(self):
        """Temp files a killed run left (up to two per worker): only one converter runs at a
        time on an output folder, so any found now are orphans."""
        for d in os.listdir(self.out):
            if d.startswith("rows_") and os.path.isdir(os.path.join(self.out, d)):
                for x in os.listdir(os.path.join(self.out, d)):
                    if _TMP.match(x):
                        _remove(os.path.join(self.out, d, x))

    def run(self):
        self._sweep()
        source = _samples(self.ids_path)
        with open(self.index_path, "ab", buffering=0) as self.index, ThreadPoolExecutor(self.threads) as self.pool:
            try:
                while True:
                    sample = self.todo.popleft() if self.todo else next(source, None)
                    if sample is None:
                        if not self.queue:
                            break
                        self._settle(self.queue.popleft())  # may rewind samples into todo
                        continue
                    self.queue.append(self._plan(sample))
                    while self.queue and (len(self.queue) > 2 * self.threads or self.queue[0].future is None
                                          or self.queue[0].future.done()):
                        self._settle(self.queue.popleft())
            finally:
                for e in self.queue:
                    e.discard()
        return self.counts

    def _plan(self, sample):
        sid, ids, mask, err = sample
        if err is None and sid in self.seen:
            err = "sample id %r appears twice in %s" % (sid, self.ids_path)
        if isinstance(err, tuple):
            return _Entry(sample, "rejected", ["REJECTED %s\t%s" % (sid, err[1])])
        if err is not None:
            return _Entry(sample, "failed", ["FAIL %s\t%s" % (sid, err)])
        self.seen.add(sid)
        i = self.by_id.get(sid)
        at = i if i is not None else self.nxt
        final = os.path.join(group_dir(self.out, at, self.group), "data_%d.ckpt" % at)
        path = os.path.join(self.dumps, sid + ".safetensors")
        lines = []
        if i is not None and os.path.exists(final):
            try:
                h = verify_features(final, ids, mask)
                if self.hidden is None or h == self.hidden:
                    self.hidden = h
                    return _Entry(sample, "skipped", ["SKIP %d %s" % (i, sid)], dump=path if self.remove_dumps else None)
            except (DumpError, zipfile.BadZipFile, OSError, KeyError) as e:
                lines.append("REDO %d %s\t%s" % (i, sid, e))
        if not os.path.exists(path):
            if i is not None:
                return _Entry(sample, "failed", lines + ["FAIL %s\tindexed as %d but its file is gone and %s is missing" % (sid, i, path)])
            return _Entry(sample, "missing", lines + ["MISSING %s\tno %s" % (sid, path)])
        try:
            dump = read_header(path)
            self.hidden = check_dump(dump, ids, self.hidden)
            os.makedirs(os.path.dirname(final), exist_ok=True)
        except (DumpError, OSError, ValueError) as e:
            return _Entry(sample, "failed", lines + ["FAIL %s\t%s" % (sid, e)])
        if i is None:
            self.nxt += 1
        future = self.pool.submit(_write_tmp, final, ids, mask, dump, self.fsync)
        return _Entry(sample, "written", lines, dump=path, future=future, i=at, new=i is None, final=final)

    def _settle(self, e):
        sid, ids = e.sample[0], e.sample[1]
        if e.future is not None:
            try:
                tmp, size = e.future.result()
                try:
                    os.replace(tmp, e.final)
                except OSError:
                    _remove(tmp)
                    raise
            except (DumpError, OSError, ValueError) as err:
                self.counts["failed"] += 1
                for line in e.lines + ["FAIL %s\t%s" % (sid, err)]:
                    self.log(line)
                if e.new:
                    self._rewind(e.i)
                return
            if e.new:
                # One write of one line on an O_APPEND descriptor: a reader never sees half a row.
                self.index.write((json.dumps({"i": e.i, "id": sid, "tokens": len(ids)}) + "\n").encode())
                self.by_id[sid] = e.i
                if self.fsync:
                    os.fsync(self.index.fileno())
            e.lines.append("OK %d %s %d %d" % (e.i, sid, len(ids), size))
        self.counts[e.key] += 1
        if e.dump is not None and self.remove_dumps:
            # Freeing a dump's pages is work (bench/convert-rate.md): on a worker, not here; the
            # pool is drained before run() returns.
            self.pool.submit(_remove, e.dump)
        for line in e.lines:
            self.log(line)

    def _rewind(self, i):
        """Index i stays free: everything planned after it is planned again."""
        later = list(self.queue)
        self.queue.clear()
        for e in later:
            e.discard()
            self.seen.discard(e.sample[0])
        self.todo.extendleft(e.sample for e in reversed(later))
        self.nxt = i


def convert(dumps, ids_path, out, group, start=0, hidden=None, fsync=False, log=print, remove_dumps=False, threads=None):
    """Returns the counts; every sample lands in exactly one of them, with a line on `log`.

    With remove_dumps, a sample's dump is deleted only once its file is renamed into place and
    its index line appended (or, for a SKIP, once the file in place is verified): a crash in
    between leaves the dump, and the rerun writes or skips it again. A FAIL keeps its dump."""
    os.makedirs(out, exist_ok=True)
    conv = _Converter(dumps, ids_path, out, group, start, hidden, fsync, log, remove_dumps, threads or THREADS)
    counts = conv.run()
    log("END written=%(written)d skipped=%(skipped)d missing=%(missing)d rejected=%(rejected)d failed=%(failed)d" % counts)
    return counts


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m aerie_hs.ckpt")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="dumps (<rid>.safetensors) -> SpecForge's rows_<g>-<g+G>/data_<i>.ckpt")
    c.add_argument("--dumps", required=True, help="folder of <sample id>.safetensors from the capture")
    c.add_argument("--ids", required=True, help='JSONL, one {"id", "input_ids", "loss_mask"} per sample, in file order')
    c.add_argument("--out", required=True, help="SpecForge's --output-path layout is written here")
    c.add_argument("--file-group-size", type=int, required=True, help="files per rows_<g>-<g+G> folder (SpecForge's --file-group-size)")
    c.add_argument("--start-index", type=int, default=0, help="first data_<i> index when index.jsonl holds none higher")
    c.add_argument("--hidden-size", type=int, default=None, help="refuse dumps of another hidden size")
    c.add_argument("--fsync", action="store_true", help="fsync each file before its rename (survives power loss, slower)")
    c.add_argument("--threads", type=int, default=None, help="files written at once (default: min(4, CPUs), here %d)" % THREADS)
    c.add_argument("--remove-dumps", action="store_true",
                   help="delete each dump once its data_<i>.ckpt is in place and indexed, and the dump of a sample already done (SKIP); a FAIL keeps its dump")
    a = ap.parse_args(argv)
    if a.file_group_size <= 0 or a.start_index < 0:
        ap.error("--file-group-size must be > 0 and --start-index >= 0")
    if a.threads is not None and a.threads <= 0:
        ap.error("--threads must be > 0")
    if not os.path.isdir(a.dumps) or not os.path.isfile(a.ids):
        ap.error("--dumps must be a folder and --ids a file (got %s, %s)" % (a.dumps, a.ids))
    counts = convert(a.dumps, a.ids, a.out, a.file_group_size, a.start_index, a.hidden_size, a.fsync,
                     log=lambda s: sys.stdout.write(s + "\n"), remove_dumps=a.remove_dumps, threads=a.threads)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
