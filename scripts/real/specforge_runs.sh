#!/usr/bin/env bash
# Every real SpecForge run aerie's fixtures come from, in one go, on the lent GPU machine:
#   bash scripts/real/specforge_runs.sh setup head v02-20e2e3f0 v02-73e6f808
# Each phase leaves its capture as $OUT/<phase>.tgz (folder specforge-<commit>/), so a call
# cut short still returns the phases it finished. Needs .carry/ (wheels, SpecForge trees,
# run/ from render_plans.sh). SF_CPU=1 rehearses on a CPU machine with .venv-real (the
# launcher swaps the Triton loss; HEAD runs get training.fsdp_sharding=NO_SHARD).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
S=$REPO/scripts/real
CARRY=$REPO/.carry
R=/tmp/real
OUT=${OUT:-$R/out}
DEADLINE=${DEADLINE:-520}   # seconds since start: a phase not begun by then is skipped
T0=$(date +%s)
mkdir -p "$R/cap" "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if [ -n "${SF_CPU:-}" ]; then
  PY=$REPO/.venv-real/bin/python; TORCHRUN=$REPO/.venv-real/bin/torchrun; SITE=
else
  PY=python3; TORCHRUN=torchrun; SITE=/tmp/site
fi
el() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(el)s] $*" | tee -a "$R/cap/timeline.txt"; }
lsr() { ls -la --time-style=+ -R "$1" > "$2" 2>&1; }
# newest complete checkpoint the way aerie picks one: highest step whose state file is non-empty
newest() { # DIR REGEX STATEFILE
  $PY - "$@" <<'PY'
import os, re, sys
d, pat, state = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3]
best = None
for name in os.listdir(d) if os.path.isdir(d) else []:
    m = pat.match(name); p = os.path.join(d, name, state)
    if m and not os.path.islink(os.path.join(d, name)) and os.path.isfile(p) and os.path.getsize(p) > 0:
        if best is None or int(m.group(1)) > best[0]: best = (int(m.group(1)), os.path.join(d, name))
print(best[1] if best else "")
PY
}
# v0.2: newest checkpoint aerie would resume from (src/stages/train/run.ts checkpointProblems:
# training_state.pt non-empty plus a servable drafter); with --resume, damaged newer ones are
# renamed <dir>.incomplete-<ms> as aerie does, so the script's own pick does not land on them.
v02pick() { # OUTDIR MODE NOTES
  $PY - "$@" <<'PY'
import os, re, sys, time
d, mode, notes = sys.argv[1:4]
pat = re.compile(r"^epoch_(\d+)_step_(\d+)$")
found = sorted(((int(m[1]), int(m[2]), n) for n in os.listdir(d) if (m := pat.match(n))), reverse=True) if os.path.isdir(d) else []
with open(notes, "w") as fh:
    for e, s, n in found:
        p = os.path.join(d, n)
        size = lambda f: os.path.getsize(os.path.join(p, f)) if os.path.isfile(os.path.join(p, f)) else 0
        bad = [f for f, least in (("training_state.pt", 1), ("config.json", 1), ("model.safetensors", 9)) if size(f) < least]
        if not bad:
            fh.write(f"resume from {p}\n"); print(p); break
        if mode == "resume":
            aside = f"{p}.incomplete-{int(time.time() * 1000)}"
            os.rename(p, aside); fh.write(f"moved damaged {p} ({bad} missing/empty) to {aside}\n")
        else:
            fh.write(f"skipped damaged {p} ({bad} missing/empty)\n")
PY
}
# run ARGV in its own session (so kill -9 -PGID takes the whole tree), watching WATCHDIR
run_watched() { # LOG WATCHDIR EVENTS KILLREGEX(or "") TIMEOUT -- argv...
  local logf=$1 wdir=$2 ev=$3 kre=$4 to=$5; shift 6
  local t1=$(date +%s%N)
  setsid timeout -s KILL "$to" "$@" > "$logf" 2>&1 &
  local pid=$!
  if [ -n "$kre" ]; then $PY "$S/watch_dir.py" "$wdir" --pid $pid --pgid $pid --kill-when "$kre" > "$ev" 2>&1 &
  else $PY "$S/watch_dir.py" "$wdir" --pid $pid > "$ev" 2>&1 & fi
  local wpid=$!
  wait $pid; local rc=$?
  wait $wpid
  local t2=$(date +%s%N)
  printf "rc=%s wall_ms=%s argv=%s\n" "$rc" "$(( (t2 - t1) / 1000000 ))" "$*" >> "${logf%.log}.rc"
  return 0
}

phase_setup() {
  if [ -z "$SITE" ]; then :; else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$CARRY"/whl/*.whl || return 1
    # SpecForge v0.2.0 pins transformers 4.57.1 (its requirements.txt); its draft model
    # rejects transformers 5's always-present rope_scaling {'rope_type': 'default'}.
    if ls "$CARRY"/whl-tf4/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-tf4 "$CARRY"/whl-tf4/*.whl || return 1
    fi
  fi
  {
    date -u +%FT%TZ; uname -a; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | head -3
    PYTHONPATH=$SITE $PY -c 'import sys,torch,transformers,accelerate,safetensors,pydantic,datasets; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available()); [print(m.__name__, m.__version__) for m in (transformers,accelerate,safetensors,pydantic,datasets)]'
    PYTHONPATH=$SITE $PY -c 'import triton; print("triton", triton.__version__)' 2>&1 | tail -1
  } > "$R/cap/env.txt" 2>&1
  PYTHONPATH=$SITE $PY "$S/make_tiny_target.py" "$R/target" --draft-config "$R/draft-config.json" > "$R/cap/make_target.log" 2>&1 || return 1
  PYTHONPATH=$SITE $PY "$S/make_features.py" "$R/target" "$R/features" --conversations "$R/conversations.jsonl" > "$R/cap/make_features.log" 2>&1 || return 1
  log "setup done: $(tail -1 "$R/cap/make_features.log")"
}

# one aerie run directory: the extract stage's output (features + vocab mapping) and data/train.jsonl
rundir() { local d=$R/aerie/runs/$1; mkdir -p "$d/data" "$d/train"; cp -r "$R/features" "$d/hidden_states"; cp "$R/conversations.jsonl" "$d/data/train.jsonl"; echo "$d"; }

phase_head() {
  local H=$R/cap/specforge-a6b6b023; mkdir -p "$H"
  export PYTHONPATH=$CARRY/sf-a6b6b023${SITE:+:$SITE}
  local sf=(python3 -m specforge.cli) extra=()
  if [ -n "${SF_CPU:-}" ]; then sf=("$PY" "$S/specforge_cpu.py"); extra=(training.fsdp_sharding=NO_SHARD); fi
  cp "$CARRY/run/plan-head.txt" "$H/aerie-plan.txt"
  # (1) clean run
  local d; d=$(rundir r1); sed "s#<run-id>#r1#g" "$CARRY/run/specforge.yaml.tmpl" > "$d/train/specforge.yaml"
  cp "$d/train/specforge.yaml" "$H/specforge.yaml"
  log "head clean"
  (cd "$d/train" && run_watched "$H/clean.log" "$d/train/output" "$H/clean-events.txt" "" 240 -- "${sf[@]}" train -c "$d/train/specforge.yaml" "${extra[@]}")
  lsr "$d/train" "$H/ls-after-clean.txt"
  local ck; ck=$(newest "$d/train/output" '^tiny-step(\d+)$' training_state.pt)
  if [ -n "$ck" ]; then
    $PY "$S/inspect_outputs.py" zip "$ck/training_state.pt" > "$H/training_state.pt.zip.txt" 2>&1
    $PY "$S/inspect_outputs.py" zip "$ck/training_state_rank0.pt" > "$H/training_state_rank0.pt.zip.txt" 2>&1
    PYTHONPATH=$PYTHONPATH $PY "$S/inspect_outputs.py" pt-summary "$ck/training_state.pt" > "$H/training_state.pt.keys.json" 2>&1
    PYTHONPATH=$PYTHONPATH $PY "$S/inspect_outputs.py" pt-summary "$ck/training_state_rank0.pt" > "$H/training_state_rank0.pt.keys.json" 2>&1
    # (3) export, argv as aerie renders it
    local line; line=$(sed -e "s#<run-id>#r1#g" -e "s#tiny-step<N>#$(basename "$ck")#" "$CARRY/run/export.argv")
    eval "set -- $line"; shift 3
    log "head export from $ck"
    (cd "$d/train" && run_watched "$H/export.log" "$d/train/drafter" "$H/export-events.txt" "" 120 -- "${sf[@]}" "$@")
    cp "$d/train/drafter/config.json" "$H/export-config.json" 2>/dev/null
    $PY "$S/inspect_outputs.py" st-header "$d/train/drafter/model.safetensors" > "$H/export-safetensors-header.json" 2>&1
    lsr "$d/train/drafter" "$H/ls-drafter.txt"
  fi
  cp "$d/hidden_states/rows_0-2000/data_0.ckpt" "$H/data_0.ckpt"
  PYTHONPATH=$PYTHONPATH $PY "$S/inspect_outputs.py" pt-summary "$H/data_0.ckpt" > "$H/data_0.ckpt.keys.json" 2>&1
  PYTHONPATH=$PYTHONPATH $PY "$S/inspect_outputs.py" pt-summary "$d/hidden_states/vocab_mapping/vocab_mapping.pt" > "$H/vocab_mapping.pt.keys.json" 2>&1
  # (2) a run killed -9 the moment step 8's checkpoint directory appears, then resumed
  d=$(rundir r2); sed "s#<run-id>#r2#g" "$CARRY/run/specforge.yaml.tmpl" > "$d/train/specforge.yaml"
  log "head kill"
  (cd "$d/train" && run_watched "$H/kill.log" "$d/train/output" "$H/kill-events.txt" '^tiny-step8$' 240 -- "${sf[@]}" train -c "$d/train/specforge.yaml" "${extra[@]}")
  lsr "$d/train" "$H/ls-after-kill.txt"
  ck=$(newest "$d/train/output" '^tiny-step(\d+)$' training_state.pt)
  echo "$ck" > "$H/resume-from.txt"
  log "head resume from $ck"
  (cd "$d/train" && run_watched "$H/resume.log" "$d/train/output" "$H/resume-events.txt" "" 240 -- "${sf[@]}" train -c "$d/train/specforge.yaml" "${extra[@]}" "training.resume_from=$ck")
  lsr "$d/train" "$H/ls-after-resume.txt"
  cp "$R/cap/env.txt" "$R/cap/timeline.txt" "$H/" 2>/dev/null
  tar -czf "$OUT/head.tgz" -C "$R/cap" specforge-a6b6b023
}

phase_v02() { # REV RESUME_MODE(resume|ckpt-dir) [EXTRA_SITE] [kill-only]
  local rev=$1 mode=$2 xsite=${3:-} only=${4:-} V=$R/cap/specforge-$1; mkdir -p "$V"
  ln -sfn "$CARRY/sf-$rev" "$R/sf"
  export PYTHONPATH=$CARRY/sf-$rev${xsite:+:$xsite}${SITE:+:$SITE}
  PYTHONPATH=$PYTHONPATH $PY -c 'import transformers, tokenizers; print("versions in this phase: transformers", transformers.__version__, "tokenizers", tokenizers.__version__)' > "$V/phase-versions.txt" 2>&1
  cp "$CARRY/run/plan-v02.txt" "$V/aerie-plan.txt"
  argv_for() { local line; line=$(sed "s#<run-id>#$1#g" "$CARRY/run/v02.argv"); eval "set -- $line"; printf '%s\n' "$@"; }
  stubbed() { local a; while read -r a; do if [ "$a" = /tmp/real/sf/scripts/train_eagle3.py ]; then printf '%s\n' "$S/specforge_cpu.py" --stub-sglang --script "$a"; else printf '%s\n' "$a"; fi; done; }
  local d argv ck
  if [ -z "$only" ]; then
  # (a) as aerie renders it, unmodified
  d=$(rundir "$rev-plain"); mapfile -t argv < <(argv_for "$rev-plain")
  [ -n "${SF_CPU:-}" ] && argv[0]=$TORCHRUN
  log "v02 $rev plain"
  (cd "$d/train" && run_watched "$V/plain.log" "$d/train/output" "$V/plain-events.txt" "" 120 -- "${argv[@]}")
  # (b) clean, with SGLang's module-level imports satisfied by the stand-in
  d=$(rundir "$rev-clean"); mapfile -t argv < <(argv_for "$rev-clean" | stubbed)
  [ -n "${SF_CPU:-}" ] && argv[0]=$TORCHRUN
  log "v02 $rev clean (sglang stand-in)"
  (cd "$d/train" && run_watched "$V/clean.log" "$d/train/output" "$V/clean-events.txt" "" 200 -- "${argv[@]}")
  lsr "$d/train" "$V/ls-after-clean.txt"
  ck=$(newest "$d/train/output" '^epoch_\d+_step_(\d+)$' training_state.pt)
  if [ -n "$ck" ]; then
    $PY "$S/inspect_outputs.py" zip "$ck/training_state.pt" > "$V/training_state.pt.zip.txt" 2>&1
    PYTHONPATH=$PYTHONPATH $PY "$S/inspect_outputs.py" pt-summary "$ck/training_state.pt" > "$V/training_state.pt.keys.json" 2>&1
    cp "$ck/config.json" "$V/checkpoint-config.json" 2>/dev/null
    $PY "$S/inspect_outputs.py" st-header "$ck/model.safetensors" > "$V/checkpoint-safetensors-header.json" 2>&1
  fi
  fi
  # (c) killed -9 the moment step 10's checkpoint directory appears
  d=$(rundir "$rev-kill"); mapfile -t argv < <(argv_for "$rev-kill" | stubbed)
  [ -n "${SF_CPU:-}" ] && argv[0]=$TORCHRUN
  log "v02 $rev kill"
  (cd "$d/train" && run_watched "$V/kill.log" "$d/train/output" "$V/kill-events.txt" '^epoch_\d+_step_10$' 200 -- "${argv[@]}")
  lsr "$d/train" "$V/ls-after-kill.txt"
  ck=$(v02pick "$d/train/output" "$mode" "$V/resume-pick.txt")
  echo "$ck" > "$V/resume-from.txt"
  # (d) the resume this revision supports
  if [ -n "$ck" ]; then
    if [ "$mode" = resume ]; then
      argv+=(--resume)
    else
      local n=${ck##*_step_} i
      for i in "${!argv[@]}"; do [ "${argv[$i]}" = --output-dir ] && argv[$((i+1))]="${argv[$((i+1))]}/resume_step_$n"; done
      argv+=(--ckpt-dir "$ck" --max-num-steps $((24 - n)))
    fi
    log "v02 $rev resume ($mode) from $ck"
    (cd "$d/train" && run_watched "$V/resume.log" "$d/train/output" "$V/resume-events.txt" "" 200 -- "${argv[@]}")
    lsr "$d/train" "$V/ls-after-resume.txt"
  fi
  cp "$R/cap/env.txt" "$R/cap/timeline.txt" "$V/" 2>/dev/null
  tar -czf "$OUT/v02-$rev${only:+-$only}.tgz" -C "$R/cap" "specforge-$rev"
}

for p in "$@"; do
  if [ "$(el)" -gt "$DEADLINE" ]; then log "skipped $p: past the ${DEADLINE}s deadline"; continue; fi
  case $p in
    setup) phase_setup || { log "setup failed"; cp "$R"/cap/*.log "$R/cap/env.txt" "$OUT/" 2>/dev/null; exit 1; } ;;
    head) phase_head ;;
    v02-20e2e3f0) phase_v02 20e2e3f0 resume ;;
    v02-73e6f808) phase_v02 73e6f808 ckpt-dir ;;
    v02-73e6f808-tf4) phase_v02 73e6f808 ckpt-dir /tmp/site-tf4 ;;
    v02-20e2e3f0-kill) phase_v02 20e2e3f0 resume "" kill-only ;;
    *) log "unknown phase $p" ;;
  esac
done
cp "$R/cap/timeline.txt" "$OUT/timeline.txt"
log "done"
