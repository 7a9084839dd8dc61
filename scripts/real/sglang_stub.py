"""Import-only stand-in for the `sglang` package, for SpecForge v0.2's train_eagle3.py.

Both v0.2 revisions import sglang at module level even for offline training, which never
runs a target engine (SpecForge@73e6f808:specforge/modeling/target/eagle3_target_model.py:8-15,
SpecForge@20e2e3f0:specforge/args.py:5). A machine without sglang fails at that import; with
this directory on PYTHONPATH (Python runs sitecustomize at start-up, in every torchrun worker
too), every `sglang.*` module resolves to a placeholder whose attributes are placeholders.
Any real use of one (calling into SGLang) raises, so an offline run that gets through is
SpecForge's own code throughout.
"""
import importlib.abc
import importlib.machinery
import sys
import types


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__qualname__}.{name}")

    def __iter__(cls):
        return iter(())

    def __contains__(cls, _item):
        return True

    def __call__(cls, *a, **k):
        # Module-level probes such as sglang.srt.utils.is_hip() run at import: answer "no".
        return None

    def __bool__(cls):
        return False



def _placeholder(name):
    return _Meta(name, (), {"__module__": "sglang", "__qualname__": name})


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _placeholder(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "sglang" or fullname.startswith("sglang."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _Module(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


def install():
    try:
        import sglang  # noqa: F401  (a real sglang is installed: use it)
    except ImportError:
        sys.meta_path.insert(0, _Finder())
