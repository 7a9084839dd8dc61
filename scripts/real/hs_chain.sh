#!/usr/bin/env bash
# aerie's extraction chain on real tensors, then real SpecForge a6b6b023 on its files:
#   bash scripts/real/hs_chain.sh render      (here: `aerie plan` of the fixture's aerie.yaml into .carry/run2/)
#   bash scripts/real/hs_chain.sh all         (device: setup, chain, train; capture in $OUT/hs-chain.tgz)
# SF_CPU=1 rehearses on a CPU machine with .venv-real (scripts/real/specforge_cpu.py's loss swap
# and training.fsdp_sharding=NO_SHARD). Layout: /tmp/real2/{target,draft-config.json,...}, the
# run's directory /tmp/real2/aerie/runs/r1 (hidden_states = the converter's output).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
S=$REPO/scripts/real
CARRY=$REPO/.carry
R=/tmp/real2
C=$R/cap/aerie-hs-chain
OUT=${OUT:-$R/out}
T0=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if [ -n "${SF_CPU:-}" ]; then PY=$REPO/.venv-real/bin/python; SITE=; else PY=python3; SITE=/tmp/site; fi
SFPATH=$CARRY/sf-a6b6b023${SITE:+:$SITE}
el() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(el)s] $*" | tee -a "$C/timeline.txt"; }
lsr() { ls -la --time-style=+ -R "$1" > "$2" 2>&1; }
timed() { # NAME -- argv... : stdout+stderr to $C/NAME.log, rc and wall to $C/NAME.rc
  local n=$1; shift 2; local t1=$(date +%s%N)
  "$@" > "$C/$n.log" 2>&1; local rc=$?
  printf "rc=%s wall_ms=%s argv=%s\n" "$rc" "$(( ($(date +%s%N) - t1) / 1000000 ))" "$*" >> "$C/$n.rc"
  return $rc
}
# as scripts/real/specforge_runs.sh: the trainer in its own session, watched, killed -9 on a path
run_watched() { # LOG WATCHDIR EVENTS KILLREGEX(or "") TIMEOUT -- argv...
  local logf=$1 wdir=$2 ev=$3 kre=$4 to=$5; shift 6
  local t1=$(date +%s%N)
  setsid timeout -s KILL "$to" "$@" > "$logf" 2>&1 &
  local pid=$!
  if [ -n "$kre" ]; then $PY "$S/watch_dir.py" "$wdir" --pid $pid --pgid $pid --kill-when "$kre" > "$ev" 2>&1 &
  else $PY "$S/watch_dir.py" "$wdir" --pid $pid > "$ev" 2>&1 & fi
  local wpid=$!
  wait $pid; local rc=$?; wait $wpid
  printf "rc=%s wall_ms=%s argv=%s\n" "$rc" "$(( ($(date +%s%N) - t1) / 1000000 ))" "$*" >> "${logf%.log}.rc"
}
newest() { # DIR: highest tiny-stepN (not the -latest link) whose training_state.pt is non-empty
  $PY - "$1" <<'PY'
import os, re, sys
d = sys.argv[1]; best = None
for n in os.listdir(d) if os.path.isdir(d) else []:
    m = re.match(r"^tiny-step(\d+)$", n); p = os.path.join(d, n, "training_state.pt")
    if m and not os.path.islink(os.path.join(d, n)) and os.path.isfile(p) and os.path.getsize(p) > 0:
        if best is None or int(m[1]) > best[0]: best = (int(m[1]), os.path.join(d, n))
print(best[1] if best else "")
PY
}

phase_render() {
  mkdir -p "$CARRY/run2"
  (cd "$REPO" && npx aerie plan test/fixtures/real/aerie-hs-chain/aerie.yaml) > "$CARRY/run2/plan.txt"
  awk '/writes .*specforge\.yaml:$/ {on=1; next} on && /^    [a-z]/ {on=0} on {sub(/^      /, ""); print}' \
    "$CARRY/run2/plan.txt" > "$CARRY/run2/specforge.yaml.tmpl"
  grep -m1 -A3 'train · specforge export' "$CARRY/run2/plan.txt" | sed -n 's/^    argv //p' > "$CARRY/run2/export.argv"
  test -s "$CARRY/run2/specforge.yaml.tmpl" && test -s "$CARRY/run2/export.argv" && ls -la "$CARRY/run2"
}

phase_setup() {
  if [ -n "$SITE" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$CARRY"/whl/*.whl || return 1
  fi
  {
    date -u +%FT%TZ; uname -a; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | head -3
    PYTHONPATH=$SITE $PY -c 'import sys,torch,transformers,tokenizers,safetensors,numpy,pydantic; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available()); [print(m.__name__, m.__version__) for m in (transformers,tokenizers,safetensors,numpy,pydantic)]'
    (cd "$REPO" && git rev-parse HEAD 2>/dev/null || echo "no .git here")
  } > "$C/env.txt" 2>&1
}

phase_chain() {
  local H=$PYTHONPATH_HS
  log "prepare: target + self-generated chats"
  timed prepare -- $PY "$S/hs_chain.py" prepare "$R" || return 1
  log "tokens (aerie_hs.tokens, SpecForge cross-check when importable)"
  PYTHONPATH=$H:$SFPATH timed tokens -- sh -c "$PY -m aerie_hs.tokens --model $R/target --chat-template llama3 --max-length 256 --cross-check require < $R/conversations.jsonl > $R/ids.jsonl" || return 1
  log "capture"
  timed capture -- $PY "$S/hs_chain.py" capture "$R" || return 1
  local v
  for v in "true ids.jsonl true" "layer_off ids.jsonl layer-off" "true ids_shifted.jsonl shifted"; do
    set -- $v
    log "selfcheck $3"
    PYTHONPATH=$H timed "selfcheck-$3" -- sh -c "$PY -m aerie_hs.selfcheck --model $R/target --dumps $R/dumps/$1 --ids $R/$2 --greedy $R/greedy.jsonl > $C/selfcheck-$3.json"
  done
  log "convert (aerie_hs.ckpt)"
  PYTHONPATH=$H timed convert -- $PY -m aerie_hs.ckpt convert --dumps "$R/dumps/true" --ids "$R/ids.jsonl" \
    --out "$R/aerie/runs/r1/hidden_states" --file-group-size 2000 --hidden-size 256 || return 1
  timed inspect -- $PY "$S/hs_chain.py" inspect "$R" "$R/aerie/runs/r1/hidden_states" "$C" || return 1
  cp "$R/conversations.jsonl" "$R/ids.jsonl" "$R/greedy.jsonl" "$R/draft-config.json" "$R/aerie/runs/r1/hidden_states/index.jsonl" "$C/"
  $PY "$S/inspect_outputs.py" st-header "$R/dumps/true/s000.safetensors" > "$C/dump-s000-header.json" 2>&1
  lsr "$R/aerie/runs/r1/hidden_states" "$C/ls-hidden-states.txt"
  lsr "$R/dumps" "$C/ls-dumps.txt"
}

phase_train() {
  export PYTHONPATH=$SFPATH
  local sf=(python3 -m specforge.cli) extra=()
  if [ -n "${SF_CPU:-}" ]; then sf=("$PY" "$S/specforge_cpu.py"); extra=(training.fsdp_sharding=NO_SHARD); fi
  local d=$R/aerie/runs/r1; mkdir -p "$d/train" "$d/data"; cp "$R/conversations.jsonl" "$d/data/train.jsonl"
  cp "$CARRY/run2/plan.txt" "$C/aerie-plan.txt"
  # aerie passes the mapping only where the extraction wrote one (src/stages/extract/offline-driver.ts:224-225);
  # aerie_hs.ckpt writes none, so SpecForge derives it from the files.
  local vm=$d/hidden_states/vocab_mapping/vocab_mapping.pt
  sed "s#<run-id>#r1#g" "$CARRY/run2/specforge.yaml.tmpl" > "$d/train/specforge.yaml"
  [ -f "$vm" ] || sed -i '/vocab_mapping_path:/d' "$d/train/specforge.yaml"
  cp "$d/train/specforge.yaml" "$C/specforge.yaml"
  log "train, killed -9 when tiny-step8/ appears"
  (cd "$d/train" && run_watched "$C/kill.log" "$d/train/output" "$C/kill-events.txt" '^tiny-step8$' 240 -- "${sf[@]}" train -c "$d/train/specforge.yaml" "${extra[@]}")
  lsr "$d/train" "$C/ls-after-kill.txt"
  local ck; ck=$(newest "$d/train/output"); echo "$ck" > "$C/resume-from.txt"
  log "resume from $ck"
  (cd "$d/train" && run_watched "$C/resume.log" "$d/train/output" "$C/resume-events.txt" "" 240 -- "${sf[@]}" train -c "$d/train/specforge.yaml" "${extra[@]}" "training.resume_from=$ck")
  lsr "$d/train" "$C/ls-after-resume.txt"
  ck=$(newest "$d/train/output")
  local line; line=$(sed -e "s#<run-id>#r1#g" -e "s#tiny-step<N>#$(basename "$ck")#" "$CARRY/run2/export.argv")
  [ -f "$vm" ] || line=${line% --vocab-mapping *}
  eval "set -- $line"; shift 3
  log "export from $ck: $*"
  (cd "$d/train" && run_watched "$C/export.log" "$d/train/drafter" "$C/export-events.txt" "" 120 -- "${sf[@]}" "$@")
  cp "$d/train/drafter/config.json" "$C/export-config.json" 2>/dev/null
  $PY "$S/inspect_outputs.py" st-header "$d/train/drafter/model.safetensors" > "$C/export-safetensors-header.json" 2>&1
  lsr "$d/train/drafter" "$C/ls-drafter.txt"
  find "$d/train" "$R/aerie" -name 'vocab_mapping*' > "$C/vocab-mappings-found.txt" 2>&1
}

mkdir -p "$C" "$OUT"
PYTHONPATH_HS=$REPO/py
for p in "$@"; do
  case $p in
    render) phase_render ;;
    setup) phase_setup || { log "setup failed"; } ;;
    chain) phase_chain || log "chain failed" ;;
    train) phase_train ;;
    all) phase_setup && { phase_chain || log "chain failed"; } && phase_train ;;
    *) log "unknown phase $p" ;;
  esac
done
log "done"
tar -czf "$OUT/hs-chain.tgz" -C "$R/cap" aerie-hs-chain
