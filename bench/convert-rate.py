"""How fast aerie's converter (py/aerie_hs/ckpt.py) turns capture dumps into SpecForge files,
against a plain `cp` of the same dump bytes on the same filesystem, in the same run.

  python3 bench/convert-rate.py [--samples 2000] [--hidden 4096] [--tokens 200] [--dir /dev/shm/x] [--batch N]
                                [--py FOLDER [--py FOLDER2 ...]] [--out-dir /tmp/y] [--remove-dumps]
                                [--conv-arg=--threads=1 ...]

--remove-dumps times the converter as aerie runs it (each dump deleted once converted).
--out-dir puts the copy and the converted files on another filesystem than the dumps (aerie's
case: dumps on /dev/shm, files on disk); by default they share --dir.

--py names the folder holding the aerie_hs package to time (default py/); given more than once,
each converter runs on every batch right after the same `cp`, so versions are compared in one run.

Synthetic dumps (T drawn around --tokens, bf16 bytes from one random block) are made batch by
batch so that dumps, their copy and the converted files fit the filesystem (3 × a batch at a
time); per batch, `cp` runs first, then the converter, both on warm page cache, and each
batch's files are deleted before the next. Prints MB/s for both, their ratio, and the
converter's peak RSS (ru_maxrss of its process, the largest over batches).
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "py"))
from aerie_hs.safetensors_dump import ids_sha256  # noqa: E402


def make_dump(path, rid, ids, h, block, rng):
    t = len(ids)
    na, nh = t * 3 * h * 2, t * h * 2
    meta = {"format": "aerie-hs/1", "rid": rid, "tokens": str(t), "aux_layers": "[1, 15, 28]", "tp_rank": "0",
            "input_ids_sha256": ids_sha256(ids)}
    hdr = {"__metadata__": meta, "aux_hidden_state": {"dtype": "BF16", "shape": [t, 3 * h], "data_offsets": [0, na]},
           "hidden_state": {"dtype": "BF16", "shape": [t, h], "data_offsets": [na, na + nh]}}
    j = json.dumps(hdr).encode()
    j += b" " * (-len(j) % 8)
    at = rng.randrange(0, len(block) - na - nh)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(j)) + j)
        f.write(memoryview(block)[at:at + na + nh])
    os.replace(path + ".tmp", path)
    return 8 + len(j) + na + nh


def run_timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    err = p.stderr.read().decode()
    p.stderr.close()
    if status != 0:
        raise SystemExit("%s failed (%d): %s" % (cmd[0], status, err[-2000:]))
    return dt, ru.ru_maxrss * 1024


def generate(a):
    """One batch of dumps and their ids.jsonl (run in a process of its own: see main)."""
    rng = random.Random(a.seed)
    block = os.urandom(64 << 20)
    dumps, total = os.path.join(a.dir, "dumps"), 0
    with open(os.path.join(a.dir, "ids.jsonl"), "w") as f:
        for k in range(a.first, a.first + a.gen):
            t = max(8, int(rng.gauss(a.tokens, a.tokens / 10)))
            ids = [rng.randrange(128000) for _ in range(t)]
            rid = "s%06d" % k
            total += make_dump(os.path.join(dumps, rid + ".safetensors"), rid, ids, a.hidden, block, rng)
            f.write(json.dumps({"id": rid, "input_ids": ids, "loss_mask": [0] * (t // 3) + [1] * (t - t // 3)}) + "\n")
    print(total)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gen", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--dir", default="/dev/shm/aerie-convert-rate")
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--group", type=int, default=1000)
    ap.add_argument("--conv-arg", action="append", default=[], help="an extra converter argument, e.g. --conv-arg=--threads=1")
    ap.add_argument("--remove-dumps", action="store_true", help="time the converter with --remove-dumps (aerie's mode)")
    ap.add_argument("--out-dir", default=None, help="where the copy and the converted files go (default: --dir)")
    ap.add_argument("--py", action="append", default=None, help="folder holding the aerie_hs package to time")
    a = ap.parse_args()
    a.py = [os.path.abspath(p) for p in (a.py or [os.path.join(ROOT, "py")])]
    if a.gen:
        return generate(a)
    # The converter's peak RSS is read from wait4, and Linux carries a process's high-water mark
    # across exec: this parent stays small (the dumps are made by a child) so that what is
    # measured is the converter's own.
    shutil.rmtree(a.dir, ignore_errors=True)
    dest = a.out_dir or a.dir
    if a.out_dir:
        shutil.rmtree(a.out_dir, ignore_errors=True)
    out = os.path.join(dest, "out")
    tot = {"bytes": 0, "cp": 0.0, "conv": [0.0] * len(a.py), "rss": [0] * len(a.py), "out": 0}
    done = 0
    while done < a.samples:
        n = min(a.batch, a.samples - done)
        dumps, copy = os.path.join(a.dir, "dumps"), os.path.join(dest, "copy")
        os.makedirs(dumps)
        os.makedirs(copy)
        ids_path = os.path.join(a.dir, "ids.jsonl")
        gen = subprocess.run([sys.executable, __file__, "--gen", str(n), "--first", str(done), "--seed", str(done),
                              "--dir", a.dir, "--hidden", str(a.hidden), "--tokens", str(a.tokens)],
                             check=True, stdout=subprocess.PIPE)
        tot["bytes"] += int(gen.stdout)
        names = sorted(os.path.join(dumps, x) for x in os.listdir(dumps))
        dt, _ = run_timed(["cp"] + names + [copy])
        tot["cp"] += dt
        # versions take turns going first, batch by batch, so neither always finds a fresh page cache
        order = list(range(len(a.py)))
        for turn, v in enumerate(order[::-1] if (done // a.batch) % 2 else order):
            os.environ["PYTHONPATH"] = a.py[v]
            if a.remove_dumps and turn:  # the last converter took the dumps: the same bytes again, from cp's copy
                for x in os.listdir(copy):
                    shutil.copyfile(os.path.join(copy, x), os.path.join(dumps, x))
            dt, rss = run_timed([sys.executable, "-m", "aerie_hs.ckpt", "convert", "--dumps", dumps, "--ids", ids_path,
                                 "--out", out + str(v), "--file-group-size", str(a.group), "--hidden-size", str(a.hidden)]
                                + (["--remove-dumps"] if a.remove_dumps else []) + a.conv_arg)
            tot["conv"][v] += dt
            tot["rss"][v] = max(tot["rss"][v], rss)
            for d, _, fs in os.walk(out + str(v)):
                for x in fs:
                    if x.endswith(".ckpt"):
                        if v == 0:
                            tot["out"] += os.path.getsize(os.path.join(d, x))
                        os.unlink(os.path.join(d, x))
        shutil.rmtree(dumps)
        shutil.rmtree(copy)
        done += n
    mb = tot["bytes"] / 1e6
    with open(os.path.join(out + "0", "index.jsonl")) as f:
        rows = sum(1 for _ in f)
    shutil.rmtree(a.dir, ignore_errors=True)
    if a.out_dir:
        shutil.rmtree(a.out_dir, ignore_errors=True)
    print("samples %d (indexed %d), hidden %d, T~%d, dump bytes %.1f MB, ckpt bytes %.1f MB, dumps in %s, files to %s, batch %d"
          % (a.samples, rows, a.hidden, a.tokens, mb, tot["out"] / 1e6, a.dir, dest, a.batch))
    print("cp        %8.1f MB/s  (%.2f s)" % (mb / tot["cp"], tot["cp"]))
    for v, pkg in enumerate(a.py):
        print("convert   %8.1f MB/s  (%.2f s)  = %.0f%% of cp  peak RSS %.1f MB  [%s]"
              % (mb / tot["conv"][v], tot["conv"][v], 100 * tot["cp"] / tot["conv"][v], tot["rss"][v] / 1e6, os.path.relpath(pkg, ROOT)))


if __name__ == "__main__":
    os.environ["PYTHONPATH"] = os.path.join(ROOT, "py") + os.pathsep + os.environ.get("PYTHONPATH", "")
    main()
