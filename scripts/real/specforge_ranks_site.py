"""Installed through a `sitecustomize.py` (scripts/real/specforge_ranks.sh writes one that imports
this): every Python process of a run, including the torchrun workers SpecForge's CLI starts
itself (`python -m torch.distributed.run ... --module specforge.cli train ...`,
SpecForge@a6b6b023:specforge/launch_plan.py:542-568,759-766), gets specforge_cpu.py's
plain-torch loss when it imports `specforge.core.loss`, and nothing else changes. Nothing is
imported until that module is: the torchrun agent itself never loads torch's loss or SpecForge.
"""
import importlib.abc
import importlib.util
import sys

NAME = "specforge.core.loss"


class _CpuLoss(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != NAME:
            return None
        try:
            import triton  # noqa: F401  (a real Triton is there: leave SpecForge's kernel alone)
            return None
        except ImportError:
            return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        import specforge_cpu

        # _torch_loss_module registers its module under NAME; carry its contents into the one
        # the import system is loading, and put that one back.
        specforge_cpu._torch_loss_module()
        module.__dict__.update({k: v for k, v in sys.modules[NAME].__dict__.items() if not k.startswith("__")})
        module.__doc__ = sys.modules[NAME].__doc__
        sys.modules[NAME] = module


sys.meta_path.insert(0, _CpuLoss())
