#!/usr/bin/env bash
# SGLang's own client code as the judge in `npm test` (issue 13 item 3): .venv-sglang-bench holds
# PyPI's sglang==0.5.4 with --no-deps (its declared deps pull torch 2.8, flashinfer, sgl-kernel)
# plus exactly what `python -m sglang.bench_serving` imports at 0.5.4, and the openai client.
# No torch: 0.5.4's bench_serving never imports it (transformers warns and carries on).
# Idempotent: the marker holds the pins last installed; the tests check the same marker.
#
# Why each pin (sglang==0.5.4:<path>:<line> in the wheel):
#   aiohttp (+ aiohappyeyeballs aiosignal attrs frozenlist multidict propcache yarl idna):
#     sglang/bench_serving.py:32 (every request goes through an aiohttp session),
#     sglang/lang/backend/runtime_endpoint.py:7 (imported by sglang/__init__.py:28; `-m
#     sglang.bench_serving` imports the package first)
#   numpy: sglang/bench_serving.py:33 (random lengths, the metrics' mean/percentiles),
#     sglang/utils.py:22, sglang/lang/choices.py:5
#   pybase64: sglang/bench_serving.py:34, sglang/utils.py:23
#   requests (+ urllib3 charset_normalizer certifi idna): sglang/bench_serving.py:35
#     (GET /get_server_info for accept_length at :1884, POST /flush_cache at :1795), sglang/utils.py:24
#   pillow: sglang/bench_serving.py:37 (`from PIL import Image`, at import time)
#   tqdm: sglang/bench_serving.py:38, sglang/utils.py:27, sglang/lang/interpreter.py:15
#   transformers==4.57.1 (0.5.4's own pin, METADATA Requires-Dist transformers==4.57.1)
#     (+ tokenizers 0.22.1 and huggingface_hub 0.36.0 in its accepted ranges, filelock fsspec
#     packaging pyyaml regex safetensors typing_extensions): sglang/bench_serving.py:39-45, and
#     get_tokenizer's AutoTokenizer.from_pretrained at :702 loads --model/--tokenizer from disk
#   pydantic (+ pydantic_core annotated_types typing_inspection): sglang/utils.py:26
#   openai==1.99.1 (0.5.4's own pin, METADATA Requires-Dist openai==1.99.1) (+ anyio distro
#     httpx httpcore h11 jiter sniffio): not for bench_serving; test/real/openai-client.test.ts
#   jinja2 (+ markupsafe): transformers' apply_chat_template, which bench_serving calls only with
#     --apply-chat-template (sglang==0.5.4:sglang/bench_serving.py:1148-1153; aerie does not pass it)
#     and test/real/openai-client.test.ts calls to count the chat prompt's tokens
#
# Stand-ins (tiny modules written into the venv, each raising if ever called):
#   IPython.display (HTML, display): sglang/utils.py:25 imports it at module level; only
#     print_highlight (:365-370, a notebook helper, inside SGLANG_IS_IN_CI) calls it, and
#     bench_serving never does. The real IPython drags in ~15 packages (jedi, prompt_toolkit, ...).
#   datasets (load_dataset): sglang/bench_serving.py:36 imports it at module level; it is
#     called only for --dataset-name mmmu (:1030). aerie passes random or sharegpt with a local
#     --dataset-path. The real datasets pulls pyarrow, pandas, dill, multiprocess, xxhash.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-sglang-bench
PINS="sglang==0.5.4 \
aiohttp==3.14.3 aiohappyeyeballs==2.7.1 aiosignal==1.4.0 attrs==26.1.0 frozenlist==1.8.0 multidict==7.2.1 propcache==0.5.4 yarl==1.25.1 idna==3.20 \
numpy==2.2.6 pybase64==1.5.1 \
requests==2.34.2 urllib3==2.8.0 charset_normalizer==3.5.3 certifi==2026.10.19.post1 \
pillow==11.3.0 tqdm==4.70.1 \
transformers==4.57.1 tokenizers==0.22.1 huggingface_hub==0.36.0 filelock==4.3.1 fsspec==2026.9.0 packaging==26.4 pyyaml==6.0.4 regex==2026.11.19 safetensors==0.8.0 typing_extensions==4.16.0 \
pydantic==2.14.4 pydantic_core==2.50.5 annotated_types==0.8.0 typing_inspection==0.4.5 \
openai==1.99.1 anyio==4.16.0 distro==1.9.0 httpx==0.28.1 httpcore==1.0.9 h11==0.16.0 jiter==0.19.0 sniffio==1.3.1 \
jinja2==3.1.6 markupsafe==3.0.4"
STANDINS=1
STAMP="$(echo $PINS) | stand-ins $STANDINS"
MARKER="$VENV/.aerie-pins"
if [ "$(cat "$MARKER" 2>/dev/null)" = "$STAMP" ]; then
  exit 0
fi
echo "setup-sglang-client: installing sglang==0.5.4 (no deps), bench_serving's imports and openai into $VENV"
rm -rf "$VENV"
python3 -m venv "$VENV"
# shellcheck disable=SC2086 # the pins are words on purpose
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps $PINS 2> >(grep -v "^WARNING: Location" >&2)
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$SITE/IPython" "$SITE/datasets"
cat > "$SITE/IPython/__init__.py" <<'EOF'
"""aerie's stand-in for IPython (scripts/setup-sglang-client.sh says why): not the real package."""
EOF
cat > "$SITE/IPython/display.py" <<'EOF'
"""Stand-in: sglang==0.5.4:sglang/utils.py:25 imports these; only its notebook helper calls them."""


class HTML:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("IPython is a stand-in in .venv-sglang-bench (scripts/setup-sglang-client.sh)")


def display(*args, **kwargs):
    raise RuntimeError("IPython is a stand-in in .venv-sglang-bench (scripts/setup-sglang-client.sh)")
EOF
cat > "$SITE/datasets/__init__.py" <<'EOF'
"""aerie's stand-in for Hugging Face datasets: sglang==0.5.4:sglang/bench_serving.py:36 imports
load_dataset, called only for --dataset-name mmmu (:1030), which aerie never passes."""


def load_dataset(*args, **kwargs):
    raise RuntimeError("datasets is a stand-in in .venv-sglang-bench (scripts/setup-sglang-client.sh): --dataset-name mmmu is not supported here")
EOF
# The judge must be the real module, importable without torch.
"$VENV/bin/python" - <<'EOF'
import sys
import sglang.bench_serving, openai, transformers
assert sglang.__version__ == "0.5.4", sglang.__version__
assert "torch" not in sys.modules, "torch was imported"
EOF
echo "$STAMP" > "$MARKER"
