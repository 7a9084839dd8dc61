#!/usr/bin/env bash
# The venv `npm run test:real` runs real SpecForge in, on the CPU: .venv-real (Python 3.11).
# torch 2.13.0 is the CPU build this machine keeps on disk (pip takes it from there); SpecForge
# is PyPI's specforge==0.2.0 (the current `specforge` CLI) with --no-deps, because its
# declared deps pull sglang and a CUDA torch. Everything it imports on the offline train path
# is pinned below. Idempotent: a stamp file records the pins last installed. Then it builds the
# real tiny target model (see below), again only when its stamp differs.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-real
PINS="torch==2.13.0 numpy==2.2.6 transformers==5.17.0 accelerate==1.15.0 safetensors==0.8.0 tokenizers==0.23.2 pyarrow==25.0.0 pydantic==2.14.4 pyyaml==6.0.3 datasets==4.8.5 yunchang==0.6.4"
NODEPS="specforge==0.2.0"
STAMP="$PINS | --no-deps $NODEPS"
if [ "$(cat "$VENV/.aerie-pins" 2>/dev/null)" = "$STAMP" ] && "$VENV/bin/python" -c 'import torch, transformers, specforge.cli' 2>/dev/null; then
  :
else
  PY=$(command -v python3.11 || true)
  [ -n "$PY" ] || { echo "setup-real: python3.11 not found (torch 2.13.0's CPU wheel on this machine is for Python 3.11)" >&2; exit 1; }
  echo "setup-real: installing real SpecForge (specforge==0.2.0, no deps) and CPU torch into $VENV"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check $PINS
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps $NODEPS
  echo "$STAMP" > "$VENV/.aerie-pins"
fi

# The real tiny target (a trained 8-layer Llama, scripts/real/make_real_target.py) that real
# vLLM serves and real SpecForge trains a drafter against: built into .aerie/models/real-tiny
# (with draft-config.json beside its weights) only when missing or when its stamp (sha256 of
# the script, the corpus, the tokenizer it copies and the arguments) differs. Built in a temp
# folder and renamed into place, so a half-built model never counts.
MODEL=.aerie/models/real-tiny
MODEL_ARGS="--steps 400 --seed 0 --batch 8 --lr 4e-3"
MODEL_STAMP="$(cat scripts/real/make_real_target.py examples/data/real-target-corpus.jsonl \
  examples/models/sim-llama-8b/tokenizer.json examples/models/sim-llama-8b/tokenizer_config.json | sha256sum | cut -d' ' -f1) $MODEL_ARGS"
if [ "$(cat "$MODEL/.aerie-stamp" 2>/dev/null)" != "$MODEL_STAMP" ] || [ ! -f "$MODEL/model.safetensors" ]; then
  echo "setup-real: building the real tiny target into $MODEL (a couple of minutes on the CPU)"
  mkdir -p "$(dirname "$MODEL")"
  TMP="$MODEL.tmp-$$"
  rm -rf "$TMP"
  trap 'rm -rf "$TMP"' EXIT
  "$VENV/bin/python" scripts/real/make_real_target.py "$TMP" $MODEL_ARGS
  echo "$MODEL_STAMP" > "$TMP/.aerie-stamp"
  rm -rf "$MODEL.old"
  [ ! -e "$MODEL" ] || mv "$MODEL" "$MODEL.old"
  mv "$TMP" "$MODEL"
  rm -rf "$MODEL.old"
  trap - EXIT
fi
