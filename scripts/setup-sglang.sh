#!/usr/bin/env bash
# Idempotent: one venv per SGLang release aerie renders launch lines for, holding that
# release's PyPI wheel without its dependencies (they pull torch, CUDA kernels and ~100
# packages) plus the few small packages that importing its argument parser needs. Used by
# test/real/sglang-argparse.test.ts through scripts/real/sglang_argparse.py, which stands in
# for the heavy modules the parser never calls (scripts/real/sglang_standins.py says which; it checks on
# every run that none of them is touched while parsing). Nothing here starts a server.
#
#   bash scripts/setup-sglang.sh            # every release below
#   bash scripts/setup-sglang.sh 0.5.23     # one of them
set -euo pipefail
cd "$(dirname "$0")/.."

# What every release's import path needs for real (see scripts/real/SGLANG-ARGPARSE.md).
COMMON_PINS="numpy==2.2.6 orjson==3.13.0 psutil==7.2.2 pybase64==1.5.1 packaging==26.4 typing_extensions==4.16.0 requests==2.34.2 charset-normalizer==3.5.3 idna==3.20 urllib3==2.8.0 certifi==2026.10.19.post1"

pins_for() {
  case "$1" in
    0.5.23) echo "sglang==0.5.23 msgspec==0.23.0 ${COMMON_PINS}" ;;
    0.5.12) echo "sglang==0.5.12 dill==0.4.1 ${COMMON_PINS}" ;;
    0.5.9) echo "sglang==0.5.9 dill==0.4.1 ${COMMON_PINS}" ;;
    0.5.4) echo "sglang==0.5.4 ${COMMON_PINS}" ;;
    *) echo "setup-sglang: no pins for SGLang $1 (known: 0.5.4 0.5.9 0.5.12 0.5.23)" >&2; return 1 ;;
  esac
}

versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(0.5.4 0.5.9 0.5.12 0.5.23)

for v in "${versions[@]}"; do
  pins="$(pins_for "$v")"
  venv=".venv-sglang-${v}"
  if [ "$(cat "${venv}/.aerie-pins" 2>/dev/null)" = "${pins}" ]; then continue; fi
  echo "setup: installing SGLang ${v}'s argument parser (sglang==${v}, no deps, no torch) into ${venv}"
  rm -rf "${venv}"
  python3 -m venv "${venv}"
  # --no-compile: byte-compiling the wheel's ~3,000 modules is most of the install time, and
  # the parser imports a few hundred of them (compiled on first use).
  # shellcheck disable=SC2086 # the pins are words on purpose
  "${venv}/bin/pip" install --quiet --disable-pip-version-check --no-compile --no-deps ${pins}
  # The parser imports and judges an argv with nothing but these pins and the stand-ins.
  echo '{"argvs": [["--model-path", "/m"]]}' | "${venv}/bin/python" scripts/real/sglang_argparse.py \
    | "${venv}/bin/python" -c "import json, sys; d = json.load(sys.stdin); v = d['verdicts'][0]; sys.exit(0 if v['ok'] and not v['standins_touched'] else f'setup-sglang: SGLang ${v} parser self-test failed: {v}')"
  echo "${pins}" > "${venv}/.aerie-pins"
done
