#!/usr/bin/env bash
# Real SpecForge (PyPI specforge 0.2.0 == a6b6b023's CLI) at world size 2 on the CPU: gloo, DDP,
# SpecForge's own torchrun self-launch, specforge_cpu.py's loss through a sitecustomize hook
# (specforge_ranks_site.py). Four runs on a tiny random target and 17 feature files:
#   clean    nproc_per_node=2, to the end
#   kill     nproc_per_node=2, SIGKILL of the whole tree the moment step 8's rank-0 file lands
#   resume   nproc_per_node=2, training.resume_from=<newest dir with training_state.pt and both rank files>
#   shrink   nproc_per_node=1, training.resume_from=<that same checkpoint>: SpecForge must refuse
#   grow     nproc_per_node=1 for 4 steps, then grow-resume at nproc_per_node=2 from its step 4: refused on both ranks
# Captures (logs, listings with sizes, save events; no weights) go to $CAP.
# Usage: [R=/tmp/ranks/run] [CAP=/tmp/ranks/cap] [PHASES="ws2 grow"] bash scripts/real/specforge_ranks.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
S=$REPO/scripts/real
PY=$REPO/.venv-real/bin/python
R=${R:-/tmp/ranks/run}
CAP=${CAP:-/tmp/ranks/cap}
PHASES=${PHASES:-ws2 grow}
rm -rf "$R"; mkdir -p "$R/site" "$CAP"
echo "import specforge_ranks_site" > "$R/site/sitecustomize.py"
export PYTHONPATH=$R/site:$S HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$CAP/timeline.txt"; }
# Sizes, names and link targets; times left out so reruns compare.
lsr() { (cd "$1" && find . -printf '%y %s %p %l\n' | sort -k3) > "$2"; }

{ date -u +%FT%TZ; uname -srm; nproc; $PY -c 'import sys,torch,transformers,specforge; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.cuda.is_available()); print("transformers", transformers.__version__)'; $PY -m pip show specforge 2>/dev/null | sed -n 's/^Version: /specforge /p'; } > "$CAP/env.txt" 2>&1
$PY "$S/make_tiny_target.py" "$R/target" --draft-config "$R/draft-config.json" > "$CAP/make_target.log" 2>&1 || exit 1
$PY "$S/make_features.py" "$R/target" "$R/features" --samples 17 > "$CAP/make_features.log" 2>&1 || exit 1
log "setup: $(tail -1 "$CAP/make_features.log")"

cfg() { # NAME NPROC -> path of its config (what aerie's specforge driver writes, plus the CPU swaps' override)
  local d=$R/$1; mkdir -p "$d"
  cat > "$d/specforge.yaml" <<YAML
run_id: tiny
output_dir: $R/out/$1
model:
  target_model_path: $R/target
  draft_model_config: $R/draft-config.json
  target_backend: sglang
  vocab_mapping_path: $R/features/vocab_mapping/vocab_mapping.pt
data:
  hidden_states_path: $R/features
  max_length: 256
  chat_template: llama3
training:
  strategy: eagle3
  num_epochs: 1
  batch_size: 1
  learning_rate: 0.0001
  ttt_length: 3
  save_interval: 4
  max_checkpoints: 2
  log_interval: 1
  attention_backend: sdpa
  fsdp_sharding: NO_SHARD
deployment:
  trainer:
    nproc_per_node: $2
YAML
  echo "$d/specforge.yaml"
}
run() { # NAME WATCHDIR KILLREGEX -- argv
  local name=$1 wdir=$2 kre=$3; shift 4
  mkdir -p "$wdir"
  local t1=$(date +%s%N)
  setsid timeout -s KILL 900 "$@" > "$CAP/$name.log" 2>&1 &
  local pid=$!
  local w=("$S/watch_dir.py" "$wdir" --pid $pid --interval 0.002)
  [ -n "$kre" ] && w+=(--pgid $pid --kill-when "$kre")
  $PY "${w[@]}" > "$CAP/$name-events.txt" 2>&1 &
  local wpid=$!
  wait $pid; local rc=$?
  wait $wpid
  printf 'rc=%s wall_ms=%s argv=%s\n' "$rc" "$(( ($(date +%s%N) - t1) / 1000000 ))" "$*" > "$CAP/$name.rc"
  log "$name rc=$rc"
}
complete() { # OUTDIR WORLD: newest tiny-step<N> with training_state.pt and every rank file, non-empty
  $PY - "$@" <<'PY'
import os, re, sys
d, world = sys.argv[1], int(sys.argv[2])
need = ["training_state.pt"] + [f"training_state_rank{r}.pt" for r in range(world)]
ok = sorted((int(m[1]), n) for n in os.listdir(d) if (m := re.match(r"^tiny-step(\d+)$", n))
            and all(os.path.isfile(os.path.join(d, n, f)) and os.path.getsize(os.path.join(d, n, f)) > 0 for f in need))
print(os.path.join(d, ok[-1][1]) if ok else "")
PY
}

SF=("$PY" -m specforge.cli train -c)
phase_ws2() {
  local c c1 ck
  c=$(cfg clean 2); cp "$c" "$CAP/specforge.yaml"
  run clean "$R/out/clean" "" -- "${SF[@]}" "$c"
  lsr "$R/out/clean" "$CAP/ls-after-clean.txt"

  c=$(cfg kill 2)
  run kill "$R/out/kill" '^tiny-step8/training_state_rank0\.pt$' -- "${SF[@]}" "$c"
  lsr "$R/out/kill" "$CAP/ls-after-kill.txt"
  sleep 2; pgrep -f "$R/kill/specforge.yaml" > "$CAP/kill-survivors.txt" || true
  ck=$(complete "$R/out/kill" 2); echo "$ck" > "$CAP/resume-from.txt"
  log "resume from $ck"
  [ -n "$ck" ] || return 1
  cp -a "$R/out/kill" "$R/out/kill-snapshot"
  run resume "$R/out/kill" "" -- "${SF[@]}" "$c" "training.resume_from=$ck"
  lsr "$R/out/kill" "$CAP/ls-after-resume.txt"

  c1=$(cfg shrink 1)
  sed -i "s#output_dir: .*#output_dir: $R/out/kill-snapshot#" "$c1"
  run shrink "$R/out/kill-snapshot" "" -- "${SF[@]}" "$c1" "training.resume_from=${ck/\/out\/kill\//\/out\/kill-snapshot\/}"
}
phase_grow() {
  local c
  c=$(cfg grow 1); sed -i 's#^  num_epochs: 1#  num_epochs: 1\n  max_steps: 4#' "$c"
  run grow "$R/out/grow" "" -- "${SF[@]}" "$c"
  lsr "$R/out/grow" "$CAP/ls-after-grow.txt"
  sed -i 's#nproc_per_node: 1#nproc_per_node: 2#' "$c"
  run grow-resume "$R/out/grow" "" -- "${SF[@]}" "$c" "training.resume_from=$R/out/grow/tiny-step4"
}
for p in $PHASES; do "phase_$p"; done
log done
