#!/usr/bin/env python3
"""Run real SpecForge's CLI (`python -m specforge.cli`) on a machine with no GPU.

SpecForge's EAGLE-3 loss is a Triton kernel (SpecForge@a6b6b023:specforge/core/loss.py:173-230,
imported by name in specforge/algorithms/eagle3/model.py:38), and Triton runs only on a GPU;
the CPU build of torch does not even ship the `triton` package, so that module cannot be
imported at all. Before anything imports it, this launcher registers its own module under
the name `specforge.core.loss`, holding the same loss written in plain torch ops:
  loss = (1 / (B*T)) * sum over positions of -mask * sum_v(target_p * log_softmax(logits)).
Everything else is SpecForge's own code. Pair it with training.fsdp_sharding=NO_SHARD
(FSDP refuses to start without an accelerator; NO_SHARD makes SpecForge use DDP).

Usage: specforge_cpu.py train -c cfg.yaml [k=v ...]  |  specforge_cpu.py export --to sglang ...
       specforge_cpu.py [--stub-sglang] --script scripts/train_eagle3.py [flags ...]
         (a v0.2 script, same swap; --stub-sglang satisfies its module-level sglang imports,
          see sglang_stub.py; torchrun can start this file as its script)
"""
import sys
import types


def _torch_loss_module():
    import torch

    class LogSoftmaxLoss(torch.autograd.Function):
        """Same contract as SpecForge's Triton LogSoftmaxLoss.apply(logits, target, position_mask)."""

        @staticmethod
        def forward(ctx, logits, target, position_mask):
            B, T, _ = logits.shape
            with torch.enable_grad():
                x = logits.detach().float().requires_grad_(True)
                mask = position_mask.reshape(B, T, 1).float()
                out = -(mask * target.float() * torch.log_softmax(x, dim=-1)).sum() / (B * T)
            (grad,) = torch.autograd.grad(out, x)
            ctx.save_for_backward(grad.to(logits.dtype))
            return out.detach()

        @staticmethod
        def backward(ctx, grad_output):
            (grad,) = ctx.saved_tensors
            return grad * grad_output, None, None

    def reference_loss(logits, target_p, position_mask):
        logp = torch.log_softmax(logits.float(), dim=2)
        return -torch.sum(position_mask * target_p * logp, 2).mean()

    mod = types.ModuleType("specforge.core.loss")
    mod.__doc__ = "aerie's CPU stand-in for SpecForge's Triton loss (scripts/real/specforge_cpu.py)"
    mod.LogSoftmaxLoss = LogSoftmaxLoss
    mod._compute_loss = reference_loss
    # Registered before the package is imported: v0.2's specforge/core/__init__.py imports
    # the loss itself (through core/eagle3.py).
    sys.modules["specforge.core.loss"] = mod
    import specforge.core

    specforge.core.loss = mod


def main():
    if sys.argv[1:2] == ["--stub-sglang"]:
        import os

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import sglang_stub

        sglang_stub.install()
        del sys.argv[1]
    try:
        import triton  # noqa: F401  (a real Triton is there: run SpecForge unchanged)
    except ImportError:
        _torch_loss_module()
    if sys.argv[1:2] == ["--script"]:
        import runpy

        script = sys.argv[2]
        sys.argv = [script, *sys.argv[3:]]
        runpy.run_path(script, run_name="__main__")
        return 0
    from specforge.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
