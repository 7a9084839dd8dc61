"""What aerie's capture (aerie_hs.sglang_hook) relies on in each SGLang release it supports,
and what it needs of a server's launch line.

Pure and stdlib-only: aerie's launcher runs `check_launch_args` on the host before a launch
(`python -m aerie_hs.sglang_hook check`), the plugin runs it again inside the server, and
test/py/capture-points.test.ts holds TARGETS against the pinned wheels.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

# What the capture relies on in each pinned wheel: ("function", module, qualname, params)
# with the exact parameter list (a "*" marks keyword-only ones), or ("fields", module, class,
# attributes the class defines). scripts/real/sglang_capture_points.py records the same names
# from the wheel into test/fixtures/real/sglang-<version>/capture-points.json.
_COMMON = [
    ("function", "sglang.srt.distributed.parallel_state", "get_tensor_model_parallel_rank", []),
    ("fields", "sglang.srt.managers.schedule_batch", "ScheduleBatch",
     ["reqs", "prefix_lens", "extend_lens", "forward_mode"]),
    ("fields", "sglang.srt.managers.schedule_batch", "Req", ["rid", "origin_input_ids"]),
    ("fields", "sglang.srt.managers.utils", "GenerationBatchResult", ["logits_output"]),
]
TARGETS: Dict[str, List[tuple]] = {
    "0.5.23": _COMMON + [
        ("function", "sglang.srt.managers.scheduler_components.batch_result_processor",
         "SchedulerBatchResultProcessor.process_batch_result_prefill", ["self", "batch", "result"]),
        ("function", "sglang.srt.model_executor.model_runner_components.attention_backend_setup",
         "configure_aux_hidden_state_capture",
         ["*", "model", "eagle_use_aux_hidden_state", "eagle_aux_hidden_state_layer_ids",
          "dflash_use_aux_hidden_state", "dflash_target_layer_ids", "is_dspark"]),
        ("fields", "sglang.srt.layers.logits_processor", "LogitsProcessorOutput",
         ["hidden_states", "last_hidden_states"]),
    ],
    "0.5.12": _COMMON + [
        ("function", "sglang.srt.managers.scheduler_output_processor_mixin",
         "SchedulerOutputProcessorMixin.process_batch_result_prefill", ["self", "batch", "result"]),
        ("function", "sglang.srt.model_executor.model_runner",
         "ModelRunner.init_aux_hidden_state_capture", ["self"]),
        ("fields", "sglang.srt.model_executor.model_runner", "ModelRunner",
         ["model", "is_draft_worker", "eagle_use_aux_hidden_state",
          "eagle_aux_hidden_state_layer_ids"]),
        ("function", "sglang.srt.managers.schedule_batch",
         "ScheduleBatch.get_model_worker_batch", ["self", "seq_lens_cpu_cache"]),
        ("fields", "sglang.srt.managers.schedule_batch", "ModelWorkerBatch",
         ["capture_hidden_mode"]),
        ("fields", "sglang.srt.model_executor.forward_batch_info", "CaptureHiddenMode", ["FULL"]),
        ("function", "sglang.srt.layers.logits_processor", "LogitsProcessor.forward",
         ["self", "input_ids", "hidden_states", "lm_head", "logits_metadata",
          "aux_hidden_states", "hidden_states_before_norm"]),
        ("fields", "sglang.srt.layers.logits_processor", "LogitsProcessorOutput",
         ["hidden_states"]),
    ],
}
SUPPORTED = tuple(sorted(TARGETS))


class UnsupportedSGLang(SystemExit):
    pass


def check_version(version: str) -> str:
    if version not in TARGETS:
        raise UnsupportedSGLang(
            f"aerie's hidden-state capture supports SGLang {', '.join(SUPPORTED)}; this server "
            f"runs SGLang {version}. Pin the extraction launcher's SGLang to a supported release, "
            "or use the stock producer (extract.producer: stock) on 0.5.23.")
    return version


def check_launch_args(version: str, argv: Sequence[str]) -> List[str]:
    """The launch flags the capture needs, as fixes to make; empty when the launch is fit."""
    check_version(version)
    args = list(argv)

    def value(flag: str) -> Optional[str]:
        for i, a in enumerate(args):
            if a == flag and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
        return None

    fixes = []
    if "--disable-radix-cache" not in args:
        fixes.append("add --disable-radix-cache: a prefix served from the radix cache has no "
                     "states computed for it, so its dump could never be complete")
    if "--enable-dp-attention" in args:
        fixes.append("drop --enable-dp-attention: each DP rank holds only its own requests' "
                     "states, and the capture writes from TP rank 0 only")
    if value("--pp-size") not in (None, "1"):
        fixes.append("use --pp-size 1: the aux layers live on different pipeline ranks")
    if "--enable-mixed-chunk" in args:
        fixes.append("drop --enable-mixed-chunk: it mixes decode rows into prefill batches")
    if version == "0.5.23":
        if "--enable-return-aux-hidden-states" not in args:
            fixes.append("add --enable-return-aux-hidden-states (SGLang 0.5.23 computes the aux "
                         "states only with it)")
        if (value("--speculative-algorithm") or "").upper() != "EAGLE3":
            fixes.append("add --speculative-algorithm EAGLE3 (with the aux flag it only names "
                         "the capture convention; no draft is loaded)")
    elif version == "0.5.12" and value("--speculative-algorithm") is not None:
        fixes.append("drop --speculative-algorithm: the capture server serves no draft")
    return fixes
