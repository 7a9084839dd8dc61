#!/usr/bin/env python3
"""Watch a directory tree while a trainer runs: log every path as it appears and disappears
(temp names during a checkpoint save, symlink swaps, rotation), and optionally SIGKILL the
trainer's process group the moment a path matching --kill-when appears.

Usage: watch_dir.py DIR --pid PID [--pgid PGID --kill-when REGEX [--kill-delay S]] > events.txt
Stops when PID has exited. Times are seconds since the watcher started.

The kill takes the process group AND every descendant of PID in its own group: torchrun
starts its workers in new sessions (torch/distributed/elastic/multiprocessing/
subprocess_handler/subprocess_handler.py: start_new_session=True), so a kill -9 of
torchrun's group alone leaves the workers training on (seen on the H200 run of 20e2e3f0).
"""
import argparse
import os
import re
import signal
import time


def snapshot(root):
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            try:
                if os.path.islink(p):
                    seen[rel] = "-> " + os.readlink(p)
                elif os.path.isdir(p):
                    seen[rel] = "dir"
                else:
                    seen[rel] = "file"
            except OSError:
                pass
    return seen


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        # a zombie child of our shell still answers kill(0); read its state
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def descendants(root):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().split(")")[-1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for c in children.get(pid, []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid, pgid):
    victims = descendants(pid)
    groups = {pgid}
    for v in victims:
        try:
            groups.add(os.getpgid(v))
        except OSError:
            pass
    for g in sorted(groups):
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass
    for v in [pid, *victims]:
        try:
            os.kill(v, signal.SIGKILL)
        except OSError:
            pass
    return victims, sorted(groups)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--pgid", type=int)
    ap.add_argument("--kill-when")
    ap.add_argument("--kill-delay", type=float, default=0.0)
    ap.add_argument("--interval", type=float, default=0.0005)
    args = ap.parse_args()
    t0 = time.monotonic()
    kill_re = re.compile(args.kill_when) if args.kill_when else None
    kill_at = None
    prev = {}
    while True:
        now = snapshot(args.dir) if os.path.isdir(args.dir) else {}
        t = time.monotonic() - t0
        for rel in sorted(set(now) - set(prev)):
            print(f"{t:9.4f} + {rel} ({now[rel]})", flush=True)
            if kill_re and kill_at is None and kill_re.search(rel):
                kill_at = t + args.kill_delay
        for rel in sorted(set(prev) - set(now)):
            print(f"{t:9.4f} - {rel}", flush=True)
        for rel in sorted(k for k in set(now) & set(prev) if now[k] != prev[k]):
            print(f"{t:9.4f} ~ {rel} ({now[rel]})", flush=True)
        prev = now
        if kill_at is not None and t >= kill_at and args.pgid:
            victims, groups = kill_tree(args.pid, args.pgid)
            print(f"{t:9.4f} KILL -9 process groups {groups} (descendants of {args.pid}: {victims})", flush=True)
            print("at kill: " + ", ".join(f"{k} ({v})" for k, v in sorted(now.items())), flush=True)
            kill_at = float("inf")
        if not alive(args.pid):
            print(f"{time.monotonic() - t0:9.4f} trainer exited", flush=True)
            return
        time.sleep(args.interval)


if __name__ == "__main__":
    main()
