#!/usr/bin/env bash
# Render, with aerie's own `aerie plan`, the SpecForge config and argv the device runs use,
# into .carry/run/ (which travels to the device with the carry). Run right before the call.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.carry/run
mkdir -p "$out"
fx=test/fixtures/real
npx aerie plan "$fx/specforge-a6b6b023/aerie.yaml" > "$out/plan-head.txt"
npx aerie plan "$fx/specforge-20e2e3f0/aerie-v02.yaml" > "$out/plan-v02.txt"
# The config aerie writes: the indented block after "writes …/specforge.yaml:".
awk '/writes .*specforge\.yaml:$/ {on=1; next} on && /^    [a-z]/ {on=0} on {sub(/^      /, ""); print}' \
  "$out/plan-head.txt" > "$out/specforge.yaml.tmpl"
grep -m1 -A3 'train · specforge export' "$out/plan-head.txt" | sed -n 's/^    argv //p' > "$out/export.argv"
grep -m1 -A3 'train · train_eagle3.py' "$out/plan-v02.txt" | sed -n 's/^    argv //p' > "$out/v02.argv"
test -s "$out/specforge.yaml.tmpl" && test -s "$out/export.argv" && test -s "$out/v02.argv"
echo "rendered into $out:"; ls -la "$out"
