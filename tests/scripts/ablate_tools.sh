#!/usr/bin/env bash
# ctest: `fbt ablate` end to end on a tiny grid, then the tools that read its output.
#   ablate_tools.sh FBT_BINARY SOURCE_DIR TMP_DIR PYTHON (multiplier|plots)
# multiplier: scripts/multiplier.py fits the baselines and prints the multiplier and stability tables;
#   scripts/tables.py prints the runs, contraction, positions, tasks and curve tables.
# plots: scripts/plots.py draws the three figures (exit 77 = skipped when matplotlib is missing).
set -euo pipefail
fbt=$1 src=$2 tmp=$3 py=$4 what=$5
rm -rf "$tmp"
mkdir -p "$tmp"
cat > "$tmp/grid.json" <<'JSON'
{"base": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
          "intermediate_size": 32, "seq_len": 32, "batch_size": 2, "data": "task:addition", "task_difficulty": 1,
          "warmup_steps": 1, "feedback_start": 0.5, "eval_windows": 2, "seq_eval_windows": 1, "monitor_passes": 4},
 "runs": [{"fuser": "none", "tokens": 384}, {"fuser": "none", "tokens": 512}, {"fuser": "none", "tokens": 768},
          {"fuser": "glu", "tokens": 384}],
 "seeds": [1], "evals": 2, "task_examples": 3, "task_lengths": [1, 2], "decode_timing": 0}
JSON
"$fbt" ablate --grid "$tmp/grid.json" --out_dir "$tmp/grid" --jobs 2
test "$(wc -l < "$tmp/grid/summary.csv")" -eq 5
if [[ $what == multiplier ]]; then
  "$py" "$src/scripts/multiplier.py" "$tmp/grid" --json "$tmp/m.json" | tee "$tmp/m.md"
  grep -q "Fit (parallel losses): L(n) = " "$tmp/m.md"
  grep -q "| fuser=glu+tokens=384 | 2:0.88,3:0.12 | 0.000384M |" "$tmp/m.md"
  grep -q "sequential (soft)" "$tmp/m.md"
  "$py" "$src/scripts/tables.py" "$tmp/grid" --kind runs | tee "$tmp/runs.md"
  grep -q "| fuser=glu+tokens=384 | 1 | " "$tmp/runs.md"
  "$py" "$src/scripts/tables.py" "$tmp/grid" --kind contraction | tee "$tmp/c.md"
  grep -q "| fuser=glu+tokens=384+seed=1 | 2:0.88,3:0.12 | " "$tmp/c.md"   # the stability table
  "$py" "$src/scripts/tables.py" "$tmp/grid" --kind positions | tee "$tmp/pos.md"   # loss by position in a document
  grep -q "| fuser=glu+tokens=384 | pass 1 (plain) | " "$tmp/pos.md"
  grep -q "|  | pass 3 (fused(2)) | " "$tmp/pos.md"
  "$py" "$src/scripts/tables.py" "$tmp/grid" --kind tasks | tee "$tmp/tasks.md"
  grep -q "| fuser=glu+tokens=384 | 1 | fused(2) | " "$tmp/tasks.md"
  "$py" "$src/scripts/tables.py" "$tmp/grid" --kind curve | tee "$tmp/curve.md"   # the evaluations over training
  grep -q "### fuser=glu+tokens=384 (1 seed)" "$tmp/curve.md"
  grep -qE "^\| 6 \| 0.000384M \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [-+][0-9.]+ \| [-+][0-9.]+ \|$" "$tmp/curve.md"
  "$py" -c "import json,sys; f=json.load(open(sys.argv[1]))['families'][0]; assert len(f['baselines'])==3 and f['fits']['parallel']['all']['alpha']>0, f" "$tmp/m.json"
else
  set +e
  "$py" "$src/scripts/plots.py" "$tmp/grid" --out "$tmp/fig"
  rc=$?
  set -e
  [[ $rc -eq 77 ]] && exit 77
  [[ $rc -eq 0 ]]
  for f in val_loss_vs_tokens contraction accuracy_vs_trace; do
    grep -q "<svg" "$tmp/fig/$f.svg"
  done
fi
echo "ok: $what"
