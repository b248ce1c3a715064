#!/usr/bin/env bash
# The App. F probing table with seeds (docs/EXPERIMENTS.md section 14; issue 48): trains a small model per task,
# fuser and seed on the task's own documents, probes each at the final ':' of the paper's items, and prints the
# table of every (prefill, setting, depth) cell as the mean over seeds with its 95% interval, and the trend over
# overwrites for latest_write (scripts/probe_table.py).
#
#   bash scripts/probe_seeds.sh [OUT_DIR]        (default runs/probe_seeds)
#
# Resumable: a finished training (its checkpoint) or probe (its .probe.json) is not redone. Settings (environment):
#   FBT_PROBE_TASKS   tasks (default "completion delayed_memory"; latest_write too)
#   FBT_PROBE_FUSERS  fusers (default "glu none": the full-bandwidth model and its baseline)
#   FBT_PROBE_SEEDS   training seeds (default "1 2 3")
#   FBT_PROBE_STEPS   optimizer steps (default 400: section 14's; the paper preset brings feedback in at half)
#   FBT_PROBE_MODEL   the model and batch flags (default section 14's: D 64, 2 layers, 4 heads, MLP 192, 16 x 256)
#   FBT_PROBE_TRAIN   more training flags (e.g. "--task_min_difficulty 1 --task_max_difficulty 2": a mix over writes)
#   FBT_PROBE_NULLS   null lines probed (completion, delayed_memory; default 0,8,32); training uses 8
#   FBT_PROBE_WRITES  writes per register probed (latest_write; default "2 4 8", one file each); training uses 2
#   FBT_PROBE_PREFILL prefills of a full-bandwidth model (default standard,fused(1),recurrent,recurrent(1))
#   FBT_PROBE_GROUPS  item groups (default 0: the paper's; latest_write 64)
#   FBT_JOBS          models trained and probed at a time (default 2)
#   FBT_PROBE_SMOKE=1 a smoke run (ctest scripts.probe_seeds_smoke): 1 seed, 8 steps, a tiny model, few groups
# Files: OUT_DIR/<task>_<fuser>_s<seed>/ (the run), OUT_DIR/<task>_<fuser>[_W<w>]_s<seed>.probe.json, OUT_DIR/table.md,
# OUT_DIR/table.json.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-runs/probe_seeds}"
export FBT="${FBT_BIN:-build/tools/fbt}"
[[ -x "$FBT" ]] || { echo "probe_seeds.sh: $FBT not found; build first: bash scripts/build.sh build" >&2; exit 1; }
tasks="${FBT_PROBE_TASKS:-completion delayed_memory}" fusers="${FBT_PROBE_FUSERS:-glu none}" seeds="${FBT_PROBE_SEEDS:-1 2 3}"
export STEPS="${FBT_PROBE_STEPS:-400}" NULLS="${FBT_PROBE_NULLS:-0,8,32}" WRITES="${FBT_PROBE_WRITES:-2 4 8}"
export PREFILL="${FBT_PROBE_PREFILL:-standard,fused(1),recurrent,recurrent(1)}" GROUPS_OPT="${FBT_PROBE_GROUPS:-0}" TRAIN="${FBT_PROBE_TRAIN:-}"
export MODEL="${FBT_PROBE_MODEL:---hidden_size 64 --num_hidden_layers 2 --num_attention_heads 4 --num_key_value_heads 4 --intermediate_size 192 --batch_size 16 --seq_len 256}"
if [[ -n "${FBT_PROBE_SMOKE:-}" ]]; then
  seeds=1 STEPS=8 NULLS=0,8 WRITES="2 4" GROUPS_OPT=8 TRAIN="$TRAIN --warmup_steps 2"
  MODEL="--hidden_size 16 --num_hidden_layers 1 --num_attention_heads 2 --num_key_value_heads 2 --intermediate_size 32 --batch_size 2 --seq_len 256"
fi
export OUT="$out"
mkdir -p "$out"

probe() {  # OUT_FILE ARGS...: fbt probe ARGS with the prefills, its result renamed into place when complete
  local f=$1
  shift
  if "$FBT" probe "$@" "--prefill=$PREFILL" --out "$f.tmp" > "$f.log" 2>&1; then
    mv "$f.tmp" "$f"
  else
    echo "probe_seeds.sh: probe $f failed (its log: $f.log)" >&2
    tail -3 "$f.log" >&2
    return 1
  fi
}
export -f probe

one() {  # task fuser seed: train, then probe
  local task=$1 fuser=$2 seed=$3 run="$OUT/$1_$2_s$3"
  if [[ ! -f "$run/checkpoint/model.safetensors" ]]; then
    # shellcheck disable=SC2086
    "$FBT" train $MODEL $TRAIN --steps "$STEPS" --seed "$seed" --eval_every 0 --progress false --preset paper \
      --data "task:$task" --task_difficulty "$([[ $task == latest_write ]] && echo 2 || echo 8)" --fuser "$fuser" --out_dir "$run" > "$run.train.log" 2>&1 ||
      { echo "probe_seeds.sh: training $run failed (its log: $run.train.log)" >&2; tail -3 "$run.train.log" >&2; return 1; }
  fi
  local groups=$GROUPS_OPT
  if [[ $task == latest_write ]]; then
    [[ $groups == 0 ]] && groups=64
    for W in $WRITES; do
      local f="$OUT/${task}_${fuser}_W${W}_s${seed}.probe.json"
      [[ -f "$f" ]] || probe "$f" --checkpoint "$run/checkpoint" --task "$task" --registers 8 --writes "$W" --groups "$groups" || return 1
    done
  else
    local f="$OUT/${task}_${fuser}_s${seed}.probe.json"
    [[ -f "$f" ]] || probe "$f" --checkpoint "$run/checkpoint" --task "$task" --null_lines "$NULLS" --groups "$groups" || return 1
  fi
  echo "probe_seeds.sh: $task $fuser seed $seed done"
}
export -f one

units=()
for task in $tasks; do for fuser in $fusers; do for seed in $seeds; do units+=("$task $fuser $seed"); done; done; done
printf '%s\n' "${units[@]}" | xargs -P "${FBT_JOBS:-2}" -L 1 bash -c 'one $0 $1 $2'
python3 scripts/probe_table.py "$out"/*.probe.json --json "$out/table.json" | tee "$out/table.md"
