/** The Python wrapper bench/client-vs-bench-serving.ts runs real sglang.bench_serving 0.5.4 under. */

// Runs sglang.bench_serving's own __main__ block in its own module namespace after wrapping
// the sglang backend's request function (sglang==0.5.4:sglang/bench_serving.py:506, looked up
// through ASYNC_REQUEST_FUNCS at :810 / :1712) and json.loads, which it calls once per frame
// (:557): the per-request latency it computes (:553, stored at :587) is kept, plus meta_info.e2e_latency of
// the frame that carries it. Nothing in how it sends, reads or times requests changes.
export const BENCH_SERVING_WRAPPER = String.raw`
import contextvars, json, os, resource, sys, time
import sglang.bench_serving as bs
_cv = contextvars.ContextVar("aerie_rec", default=None)
_loads = json.loads
def _loads_noting_e2e(s, *a, **k):
    d = _loads(s, *a, **k)
    rec = _cv.get()
    if rec is not None and d.__class__ is dict:
        mi = d.get("meta_info")
        if mi is not None and "e2e_latency" in mi:
            rec[2] = mi["e2e_latency"]
    return d
json.loads = _loads_noting_e2e
WARMUP = int(os.environ["AERIE_BENCH_WARMUP"])
_orig = bs.ASYNC_REQUEST_FUNCS["sglang"]
_recs = []
_cpu = {}
def _cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
async def _recorded(request_func_input, pbar=None):
    if len(_recs) == WARMUP and "start" not in _cpu:
        _cpu["start"] = _cpu_s()
    rec = [time.perf_counter(), 0.0, None]
    tok = _cv.set(rec)
    try:
        out = await _orig(request_func_input=request_func_input, pbar=pbar)
    finally:
        _cv.reset(tok)
    rec[1] = time.perf_counter()
    _recs.append((rec[0], rec[1], out.latency, rec[2], bool(out.success), out.output_len))
    _cpu["end"] = _cpu_s()
    return out
bs.ASYNC_REQUEST_FUNCS["sglang"] = _recorded
src = open(bs.__file__).read()
main = src[src.index('if __name__ == "__main__":'):]
g = dict(vars(bs))
g["__name__"] = "__main__"
sys.argv = ["sglang.bench_serving"] + sys.argv[1:]
exec(compile(main, bs.__file__, "exec"), g)
m = _recs[WARMUP:]
hwm = 0
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        hwm = int(line.split()[1])
with open(os.environ["AERIE_BENCH_RESULT"], "w") as f:
    json.dump({
        "reqs": [{"e2eMs": r[2] * 1000, "serverE2eMs": None if r[3] is None else r[3] * 1000, "ok": r[4], "outputTokens": r[5]} for r in m],
        "windowMs": (max(r[1] for r in m) - min(r[0] for r in m)) * 1000 if m else 0,
        "cpuUs": (_cpu.get("end", 0) - _cpu.get("start", 0)) * 1e6,
        "vmHwmKb": hwm,
    }, f)
`;
