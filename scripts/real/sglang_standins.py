"""Stand-ins for the modules SGLang's argument parser imports but never calls (see STANDINS).

Used by sglang_argparse.py. A stand-in module answers every attribute with a placeholder: a
class (so that it can be subclassed, decorated with, called, indexed and compared) whose uses
are recorded while `Record.armed` is set, which is how sglang_argparse.py shows that a parse
used none of them. Only the top-level names in STANDINS[release] are stood in for; every other
import is real or fails.
"""
from __future__ import annotations

import abc
import importlib.abc
import importlib.machinery
import sys
import types

# Top-level modules answered by a placeholder, per release, with the first import that needs it
# (`sglang==<release>:<path>:<line>`, the path inside the wheel under sglang/). Why the parser
# never calls them: add_cli_args only declares flags (str/int/float/JSON types, sglang's own
# argparse.Action subclasses, and choice lists that are sglang's own literals and registry keys,
# e.g. FunctionCallParser.ToolCallParserEnum), and parse_args only runs argparse. These modules
# serve the running server: tensors, kernels and devices (torch, triton, torchvision), image
# and tokenizer back-ends (PIL, sentencepiece), model config classes and downloads
# (transformers, huggingface_hub, safetensors, regex in Nemotron-H's config), the HTTP and IPC
# stack (fastapi, starlette, zmq, aiohttp), the OpenAI protocol and tool-call/grammar parsing
# (pydantic, pydantic_core, openai, partial_json_parser, xgrammar), and the frontend
# language's notebook and progress helpers (IPython, tqdm). sglang_argparse.py's watch enforces it.
STANDINS: dict[str, dict[str, str]] = {
    "0.5.23": {
        "torch": "srt/utils/common.py:89",
        "triton": "srt/utils/common.py:91",
        "PIL": "srt/utils/common.py:93",
        "starlette": "srt/utils/common.py:94",
        "pydantic_core": "srt/utils/msgspec_utils.py:9",
        "zmq": "srt/utils/network.py:14",
        "tqdm": "lang/interpreter.py:15",
        "IPython": "utils.py:25",
        "pydantic": "utils.py:26",
        "aiohttp": "lang/backend/runtime_endpoint.py:8",
    },
    "0.5.4": {
        "tqdm": "lang/interpreter.py:15",
        "IPython": "utils.py:25",
        "pydantic": "utils.py:26",
        "aiohttp": "lang/backend/runtime_endpoint.py:7",
        "torch": "srt/connector/base_connector.py:10",
        "safetensors": "srt/connector/serde/safe_serde.py:6",
        "triton": "srt/utils/common.py:82",
        "zmq": "srt/utils/common.py:83",
        "fastapi": "srt/utils/common.py:84",
        "PIL": "srt/utils/common.py:86",
        "starlette": "srt/utils/common.py:87",
        "openai": "srt/entrypoints/openai/protocol.py:22",
        "xgrammar": "srt/entrypoints/openai/protocol.py:40",
        "partial_json_parser": "srt/function_call/base_format_detector.py:7",
        "huggingface_hub": "srt/utils/hf_transformers_utils.py:25",
        "transformers": "srt/utils/hf_transformers_utils.py:26",
        "torchvision": "srt/configs/deepseek_ocr.py:3",
        "regex": "srt/configs/nemotron_h.py:18",
        "sentencepiece": "srt/configs/internvl.py:6",
    },
    "0.5.9": {
        "IPython": "utils.py:26",
        "pydantic": "utils.py:27",
        "tqdm": "lang/interpreter.py:15",
        "aiohttp": "lang/backend/runtime_endpoint.py:8",
        "torch": "srt/connector/base_connector.py:10",
        "safetensors": "srt/connector/serde/safe_serde.py:6",
        "triton": "srt/utils/common.py:84",
        "zmq": "srt/utils/common.py:85",
        "PIL": "srt/utils/common.py:87",
        "starlette": "srt/utils/common.py:88",
        "openai": "srt/entrypoints/openai/protocol.py:22",
        "partial_json_parser": "srt/function_call/base_format_detector.py:7",
        "huggingface_hub": "srt/utils/hf_transformers_utils.py:26",
        "transformers": "srt/utils/hf_transformers_utils.py:34",
        "torchvision": "srt/multimodal/internvl_utils.py:3",
        "regex": "srt/configs/nemotron_h.py:18",
        "sentencepiece": "srt/configs/internvl.py:6",
    },
    "0.5.12": {
        "torch": "srt/utils/common.py:81",
        "triton": "srt/utils/common.py:83",
        "PIL": "srt/utils/common.py:85",
        "starlette": "srt/utils/common.py:86",
        "torchvision": "srt/utils/common.py:90",
        "transformers": "srt/utils/hf_transformers_patches.py:50 (optional there); srt/configs/afmoe.py:3 (model config classes)",
        "tqdm": "lang/interpreter.py:15",
        "IPython": "utils.py:26",
        "pydantic": "utils.py:27",
        "aiohttp": "lang/backend/runtime_endpoint.py:8",
        "zmq": "srt/utils/network.py:12",
        "safetensors": "srt/connector/serde/safe_serde.py:6",
        "openai": "srt/entrypoints/openai/protocol.py:32",
        "partial_json_parser": "srt/function_call/base_format_detector.py:7",
        "huggingface_hub": "srt/utils/hf_transformers/common.py:22",
        "sentencepiece": "srt/configs/internvl.py:6",
    },
}


class Record:
    armed = False
    touched: list[str] = []

    @classmethod
    def note(cls, what: str) -> None:
        if cls.armed and what not in cls.touched:
            cls.touched.append(what)


class _Meta(abc.ABCMeta):
    """A placeholder is a class, so that it can also be subclassed, decorated with and called."""

    def __new__(mcls, name, bases, ns, **_kw):
        return super().__new__(mcls, name, bases, ns)

    def __init__(cls, name, bases, ns, **_kw):
        super().__init__(name, bases, ns)

    def __getattr__(cls, name):
        # __func__: sglang's transformers patches unwrap classmethods at import
        # (sglang==0.5.12:srt/utils/hf_transformers_patches.py:157).
        if (name.startswith("__") and name.endswith("__") and name != "__func__") or f"{cls.__qualname__}.{name}" in _ABSENT:
            raise AttributeError(name)
        Record.note(f"{cls.__qualname__}.{name}")
        return _placeholder(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args, **kwargs):
        Record.note(f"{cls.__qualname__}()")
        # A decorator (torch.compile, custom_op, ...) leaves sglang's own function in place.
        if len(args) == 1 and not kwargs and (isinstance(args[0], (types.FunctionType, type))):
            return args[0]
        return _placeholder(f"{cls.__qualname__}()")

    def __instancecheck__(cls, _instance):
        Record.note(f"isinstance(..., {cls.__qualname__})")
        return False

    def __subclasscheck__(cls, sub):
        Record.note(f"issubclass(..., {cls.__qualname__})")
        return type.__subclasscheck__(cls, sub)

    def register(cls, *args, **kwargs):
        # AutoConfig.register(name, Config) at import (sglang==0.5.12:srt/configs/deepseekvl2.py:687),
        # not ABCMeta.register.
        Record.note(f"{cls.__qualname__}.register()")
        return args[-1] if args else None

    def __getitem__(cls, _key):
        return cls

    def __setitem__(cls, _key, _value):
        pass

    def __contains__(cls, _item):
        return False

    def __iter__(cls):
        return iter(())

    def __len__(cls):
        return 0

    def __bool__(cls):
        return False

    def __or__(cls, _other):
        return cls

    __ror__ = __or__

    def __eq__(cls, other):
        return cls is other

    def __hash__(cls):
        return id(cls)

    def __lt__(cls, _other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __int__(cls):
        return 0

    def __index__(cls):
        return 0

    def __float__(cls):
        return 0.0


class _Base:
    def __init_subclass__(cls, **_kw):
        pass


def _placeholder(name: str) -> type:
    return _Meta(name, (_Base,), {"__module__": "aerie_standin", "__qualname__": name})


def is_standin(value) -> bool:
    return isinstance(value, _Meta) or isinstance(value, _StandinModule)


# What a machine without an accelerator answers: no torch.npu etc. (device back-ends register
# themselves as torch attributes; sglang probes hasattr(torch, ...) at import,
# sglang==0.5.23:srt/utils/common.py:188-197) and no active triton driver (fla's device probe
# catches the failure and picks "cpu", sglang==0.5.12:srt/layers/attention/fla/utils.py:240-265).
# A torch.library.Library whose handle has no name: sglang then asks torch.ops under its own
# library name (sglang==0.5.4:srt/utils/common.py:1947-1950) instead of a placeholder's.
_ABSENT = {"torch.npu", "torch.musa", "torch.hpu", "torch.mlu", "triton.runtime.driver", "torch.library.Library().m.name"}


class _StandinModule(types.ModuleType):
    def __getattr__(self, name):
        if (name.startswith("__") and name.endswith("__")) or f"{self.__name__}.{name}" in _ABSENT:
            raise AttributeError(name)
        Record.note(f"{self.__name__}.{name}")
        # Kept out of the module's __dict__, so that every later read comes here and is seen.
        cache = self.__dict__.setdefault("_aerie_standin_cache", {})
        if name not in cache:
            cache[name] = _placeholder(f"{self.__name__}.{name}")
        return cache[name]


# A stand-in's __version__ is the one the release's wheel pins (its METADATA Requires-Dist), so
# import-time version gates take the branch they take on a real install
# (e.g. sglang==0.5.12:srt/layers/attention/fla/utils.py:320 on torch_release).
PINNED_VERSIONS = {
    "0.5.4": {"torch": "2.8.0", "transformers": "4.57.1", "openai": "1.99.1", "xgrammar": "0.1.25"},
    "0.5.9": {"torch": "2.9.1", "transformers": "4.57.1", "openai": "2.6.1", "xgrammar": "0.1.27"},
    "0.5.12": {"torch": "2.11.0", "transformers": "5.6.0", "openai": "2.6.1"},
    "0.5.23": {"torch": "2.14.1", "transformers": "5.19.0", "openai": "2.8.0"},
}


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names, versions=None):
        self.names = set(names)
        self.versions = versions or {}

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StandinModule(spec.name)
        module.__path__ = []
        module.__version__ = self.versions.get(spec.name, "0.0.0")
        return module

    def exec_module(self, module):
        pass


def install_standins(version: str) -> list[str]:
    names = sorted(STANDINS.get(version, {}))
    sys.meta_path.insert(0, _Finder(names, PINNED_VERSIONS.get(version)))
    return names
