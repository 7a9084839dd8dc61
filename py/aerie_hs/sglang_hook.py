"""aerie's capture for a patched-by-plugin SGLang server: per-request hidden-state dumps.

Applied per launch, without touching the host's SGLang install: aerie puts a folder on the
extraction launch's PYTHONPATH holding this package and a `aerie_hs_capture-1.dist-info`
(see `write_plugin_dist`) whose entry point registers `plugin` in SGLang's own general-plugin
group `sglang.srt.plugins`. SGLang calls every such plugin early in each scheduler process
(sglang==0.5.12:sglang/srt/managers/scheduler.py:3999, sglang==0.5.23:...scheduler.py:6323,
`load_plugins` in sglang/srt/plugins/__init__.py:103), so the spawned TP ranks patch
themselves. SGLang logs and ignores a plugin's Exception (plugins/__init__.py:129-138); an
unsupported version therefore raises SystemExit, which it does not catch.

Environment: AERIE_HS_DUMP_DIR (required to capture; unset = the plugin does nothing),
AERIE_HS_AUX_LAYERS (the draft config's layer ids as JSON, e.g. "[1, 15, 28]"; unset = SGLang's
defaults). What is patched per version, and why, is in py/aerie_hs/CAPTURE.md; the names it
relies on (sglang_targets.py TARGETS, re-exported here) are checked against the pinned wheels
by test/py/capture-points.test.ts.

Importable without sglang or torch: the declarations and `check_launch_args` (sglang_targets.py)
and the CLI are pure; the runtime below imports SGLang only inside the patched functions.

CLI (run by aerie on the GPU host with any python3, no SGLang needed):
  python -m aerie_hs.sglang_hook plugin-dist DIR    writes DIR/aerie_hs_capture-1.dist-info, prints its path
  python -m aerie_hs.sglang_hook check --version V -- <server argv...>
      prints {"ok", "version", "fixes"} as JSON; exit 0 fit, 1 fixes listed, 2 unsupported version
      (the JSON then has "error", check_version's message, also on stderr) or a usage error.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Dict, List, Optional, Sequence

from .capture import _RID, CaptureBuffer, CaptureError, FORMAT
# SUPPORTED and TARGETS are re-exported: scripts and tests read them as sglang_hook's.
from .sglang_targets import SUPPORTED, TARGETS, UnsupportedSGLang, check_launch_args, check_version  # noqa: F401

log = logging.getLogger("aerie_hs.capture")

PLUGIN_NAME = "aerie_hs_capture"
PLUGIN_GROUP = "sglang.srt.plugins"
# The logits output's attribute that holds the final (post-norm) states beside the aux ones:
# SGLang's own on 0.5.23, the one _patch_0_5_12 sets on 0.5.12.
_FINAL_ATTR = {"0.5.23": "last_hidden_states", "0.5.12": "aerie_final_hidden_states"}


def write_plugin_dist(folder: str) -> str:
    """Make `folder` (to be put on PYTHONPATH beside aerie_hs) announce the plugin to SGLang."""
    dist = os.path.join(folder, PLUGIN_NAME + "-1.dist-info")
    os.makedirs(dist, exist_ok=True)
    with open(os.path.join(dist, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: {PLUGIN_NAME}\nVersion: 1\n")
    with open(os.path.join(dist, "entry_points.txt"), "w") as f:
        f.write(f"[{PLUGIN_GROUP}]\n{PLUGIN_NAME} = aerie_hs.sglang_hook:plugin\n")
    return dist


# --- runtime: everything below runs inside SGLang's processes ---------------------------

_state: Dict[str, object] = {"capture_ids": None, "buffer": None, "version": None}


def _installed_version() -> str:
    from importlib.metadata import version

    return version("sglang")


def _env_aux_layers() -> Optional[List[int]]:
    raw = os.environ.get("AERIE_HS_AUX_LAYERS")
    if not raw:
        return None
    ids = json.loads(raw)
    if not (isinstance(ids, list) and ids and all(isinstance(i, int) and i >= 0 for i in ids)):
        raise UnsupportedSGLang(f"AERIE_HS_AUX_LAYERS={raw!r}: expected a JSON list of "
                                "non-negative draft layer ids, e.g. [1, 15, 28]")
    return ids


def _record_capture_ids(model) -> None:
    # Read back what the model will capture rather than re-deriving it: the rule differs by
    # model (sglang==0.5.23:sglang/srt/models/deepseek_v2.py:3470-3473 adds 1 only when the
    # first id is 1), and the dump's metadata must name the layers actually taken.
    for m in model.modules():
        ids = getattr(m, "layers_to_capture", None)
        if ids:
            _state["capture_ids"] = [int(i) for i in ids]
            return
    raise UnsupportedSGLang(f"{type(model).__name__} set no layers_to_capture: this model "
                            "has no EAGLE3 capture hook in this SGLang")


def _write_error(dump_dir: str, rid: str, message: str) -> None:
    if not isinstance(rid, str) or not _RID.match(rid):
        log.error("capture failed for unnameable rid %r: %s", rid, message)
        return  # a rid with a path separator must not choose where a file lands
    path = os.path.join(dump_dir, f"{rid}.error.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"format": FORMAT, "rid": rid, "error": message}, f)
    os.replace(path + ".tmp", path)


# /health generates a token under rid "HEALTH_CHECK_<...>" (HEALTH_CHECK_RID_PREFIX,
# sglang==0.5.12 and 0.5.23:srt/constants.py:12; used at 0.5.23:srt/entrypoints/http_server.py:754).
_HEALTH_PREFIX = "HEALTH_CHECK"


def _no_graph_flags():
    # 0.5.23 has per-phase backends and no --disable-piecewise-cuda-graph
    # (sglang==0.5.23:srt/arg_groups/fields/exec_.py:613-628); 0.5.12 has both old flags.
    if _state.get("version") == "0.5.23":
        return "--cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled"
    return "--disable-cuda-graph --disable-piecewise-cuda-graph"


def _capture_batch(batch, result, final_attr: str) -> None:
    from sglang.srt.distributed.parallel_state import get_tensor_model_parallel_rank

    if get_tensor_model_parallel_rank() != 0:
        return  # the other ranks hold the same replicated rows; copying them is waste
    dump_dir = os.environ["AERIE_HS_DUMP_DIR"]
    lo = getattr(result, "logits_output", None)
    aux = getattr(lo, "hidden_states", None)
    fin = getattr(lo, final_attr, None)
    reqs, pres, exts = batch.reqs, batch.prefix_lens, batch.extend_lens
    problem = None
    if aux is None or fin is None:
        problem = ("the server computed no aux or final states for this prefill (a cuda-graph "
                   f"prefill path bypasses the capture: launch with {_no_graph_flags()})")
    elif _state["capture_ids"] is None:
        problem = "the model never set its capture layers"
    elif aux.shape[0] != sum(exts) or fin.shape[0] != sum(exts):
        problem = (f"the batch has {sum(exts)} prefill tokens but {aux.shape[0]} aux and "
                   f"{fin.shape[0]} final rows")
    if problem:
        for req in reqs:
            _write_error(dump_dir, req.rid, problem)
        return
    buf = _state["buffer"]
    if buf is None:
        buf = _state["buffer"] = CaptureBuffer(dump_dir, _state["capture_ids"], fin.shape[1], 0)
    if aux.shape[1] != fin.shape[1] * len(buf.aux_layers):
        for req in reqs:
            _write_error(dump_dir, req.rid, f"aux rows are {aux.shape[1]} wide, expected "
                         f"{len(buf.aux_layers)} layers x {fin.shape[1]}")
        return
    aux, fin = aux.to("cpu"), fin.to("cpu")  # one transfer per batch, not per request
    row = 0
    for req, pre, ext in zip(reqs, pres, exts):
        if str(req.rid).startswith(_HEALTH_PREFIX):
            row += ext
            continue  # SGLang's own health probes are no sample: nothing would ever convert them
        ids = req.origin_input_ids
        take = max(0, min(pre + ext, len(ids)) - pre)  # rows past the prompt are decode rows
        if take:
            try:
                buf.add(req.rid, ids, pre, aux[row:row + take], fin[row:row + take])
            except CaptureError as e:
                _write_error(dump_dir, req.rid, str(e))
        row += ext


def _wrap(owner, name: str, make):
    original = getattr(owner, name)
    if getattr(original, "_aerie_hs", False):
        return
    wrapped = make(original)
    wrapped._aerie_hs = True
    setattr(owner, name, wrapped)


def _prefill_wrapper(final_attr: str):
    def make(original):
        def process_batch_result_prefill(self, batch, result):
            if getattr(batch, "forward_mode", None) is None or batch.forward_mode.is_extend():
                _capture_batch(batch, result, final_attr)
            return original(self, batch, result)
        return process_batch_result_prefill
    return make


def _patch_0_5_23() -> None:
    from sglang.srt.managers.scheduler_components import batch_result_processor as brp
    from sglang.srt.model_executor import model_runner as mr
    from sglang.srt.model_executor.model_runner_components import attention_backend_setup as abs_

    def configure(original):
        def configure_aux_hidden_state_capture(*, model, **kw):
            original(model=model, **kw)
            if kw.get("eagle_use_aux_hidden_state"):
                _record_capture_ids(model)
        return configure_aux_hidden_state_capture

    _wrap(abs_, "configure_aux_hidden_state_capture", configure)
    # model_runner imported the function by name (model_runner.py:131): patch that binding too.
    if hasattr(mr, "configure_aux_hidden_state_capture"):
        mr.configure_aux_hidden_state_capture = abs_.configure_aux_hidden_state_capture
    _wrap(brp.SchedulerBatchResultProcessor, "process_batch_result_prefill",
          _prefill_wrapper(_FINAL_ATTR["0.5.23"]))


def _patch_0_5_12(draft_ids: Optional[List[int]]) -> None:
    from sglang.srt.layers import logits_processor as lp
    from sglang.srt.managers import schedule_batch as sb
    from sglang.srt.managers import scheduler_output_processor_mixin as sopm
    from sglang.srt.model_executor import model_runner as mr
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode

    def init_aux(original):
        def init_aux_hidden_state_capture(self):
            if not self.is_draft_worker:
                # 0.5.12 sets these only for a draft-serving EAGLE3 launch (model_runner.py:418)
                self.eagle_use_aux_hidden_state = True
                self.eagle_aux_hidden_state_layer_ids = draft_ids
            original(self)
            if not self.is_draft_worker:
                _record_capture_ids(self.model)
        return init_aux_hidden_state_capture

    def worker_batch(original):
        def get_model_worker_batch(self, *a, **kw):
            mwb = original(self, *a, **kw)
            # FULL only when a request asks for return_hidden_states (schedule_batch.py:2599),
            # which would also ship every row back as JSON; the capture wants rows, not JSON.
            if self.forward_mode.is_extend():
                mwb.capture_hidden_mode = CaptureHiddenMode.FULL
            return mwb
        return get_model_worker_batch

    def logits_forward(original):
        def forward(self, input_ids, hidden_states, lm_head, logits_metadata,
                    aux_hidden_states=None, *a, **kw):
            out = original(self, input_ids, hidden_states, lm_head, logits_metadata,
                           aux_hidden_states, *a, **kw)
            # Under FULL with aux, hidden_states_to_store is the aux concatenation
            # (logits_processor.py:571-576): keep the post-norm final beside it.
            if aux_hidden_states is not None:
                out.aerie_final_hidden_states = hidden_states
            return out
        return forward

    _wrap(mr.ModelRunner, "init_aux_hidden_state_capture", init_aux)
    _wrap(sb.ScheduleBatch, "get_model_worker_batch", worker_batch)
    _wrap(lp.LogitsProcessor, "forward", logits_forward)
    _wrap(sopm.SchedulerOutputProcessorMixin, "process_batch_result_prefill",
          _prefill_wrapper(_FINAL_ATTR["0.5.12"]))


def plugin() -> None:
    """SGLang's general-plugin entry point: patch this process when capture is asked for."""
    dump_dir = os.environ.get("AERIE_HS_DUMP_DIR")
    if not dump_dir:
        return
    version = check_version(_installed_version())
    try:
        draft_ids = _env_aux_layers()
    except ValueError as e:  # a JSON error would be logged and ignored by SGLang: stop instead
        raise UnsupportedSGLang(f"AERIE_HS_AUX_LAYERS is not JSON: {e}")
    # The launch line itself, where this process has it (launch_server's argv reaches the
    # scheduler under multiprocessing spawn): a launch the capture cannot serve stops here
    # rather than writing error files for every cached prefix.
    if "--model-path" in sys.argv or "--model" in sys.argv:
        fixes = check_launch_args(version, sys.argv[1:])
        if fixes:
            raise UnsupportedSGLang(f"aerie's hidden-state capture cannot work with this launch of SGLang {version}: "
                                    + "; ".join(fixes))
    if not os.path.isdir(dump_dir):
        raise UnsupportedSGLang(f"AERIE_HS_DUMP_DIR={dump_dir} is not a directory: create it "
                                "before the launch (on /dev/shm for speed)")
    if version == "0.5.23":
        if draft_ids is not None:
            log.info("0.5.23 takes the aux layers from --return-aux-hidden-state-layer-ids; "
                     "AERIE_HS_AUX_LAYERS is only checked by aerie's launcher")
        _patch_0_5_23()
    else:
        _patch_0_5_12(draft_ids)
    _state["version"] = version
    log.info("aerie capture installed for SGLang %s, dumps to %s", version, dump_dir)


# --- CLI: aerie's launcher runs these on the host before the server starts ---------------

_USAGE = ("usage: python -m aerie_hs.sglang_hook plugin-dist DIR\n"
          "       python -m aerie_hs.sglang_hook check --version V -- <server argv...>")


def _usage(message: str) -> int:
    sys.stderr.write(f"aerie_hs.sglang_hook: {message}\n{_USAGE}\n")
    return 2


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["plugin-dist"]:
        if len(args) != 2:
            return _usage("plugin-dist takes one folder")
        folder = args[1]
        # The entry point names aerie_hs.sglang_hook: without the package beside the dist-info,
        # SGLang would log an import failure and serve without the capture.
        if not os.path.isfile(os.path.join(folder, "aerie_hs", "sglang_hook.py")):
            return _usage(f"{folder} holds no aerie_hs/sglang_hook.py: copy py/aerie_hs/ there first, "
                          "or the plugin SGLang finds could not be imported")
        print(write_plugin_dist(folder))
        return 0
    if args[:1] == ["check"]:
        if "--" not in args:
            return _usage("check needs `--` before the server's argv")
        cut = args.index("--")
        head, server = args[1:cut], args[cut + 1:]
        if len(head) == 2 and head[0] == "--version":
            version = head[1]
        elif len(head) == 1 and head[0].startswith("--version="):
            version = head[0].split("=", 1)[1]
        else:
            return _usage(f"check takes --version V before `--`, got {head}")
        try:
            fixes = check_launch_args(version, server)
        except UnsupportedSGLang as e:
            sys.stderr.write(f"{e}\n")
            print(json.dumps({"ok": False, "version": version, "fixes": [], "error": str(e)}))
            return 2
        print(json.dumps({"ok": not fixes, "version": version, "fixes": fixes}))
        return 0 if not fixes else 1
    return _usage(f"unknown command {args[:1]}")


if __name__ == "__main__":
    sys.exit(main())
