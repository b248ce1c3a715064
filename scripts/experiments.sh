#!/usr/bin/env bash
# Runs the experiments of docs/EXPERIMENTS.md: three `fbt ablate` grids (examples/experiments/*.json),
# then their figures (scripts/plots.py) and the token-multiplier fit (scripts/multiplier.py).
#
#   bash scripts/experiments.sh [TEXT_FILE] [OUT_DIR]        (defaults: ../shared/data/tinyshakespeare.txt, runs/experiments)
#
# FBT_EXPERIMENTS="multiplier tasks ablation" picks grids; FBT_JOBS (default 2) runs at a time.
# Resumable: run it again after an interruption and finished runs are skipped. Needs a built tree
# (bash scripts/build.sh build); the figures need matplotlib (python3-matplotlib).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
text="${1:-../shared/data/tinyshakespeare.txt}"
out="${2:-runs/experiments}"
fbt="${FBT_BIN:-build/tools/fbt}"
[[ -x "$fbt" ]] || { echo "experiments.sh: $fbt not found; build first: bash scripts/build.sh build" >&2; exit 1; }
[[ -f "$text" ]] || { echo "experiments.sh: text file '$text' not found (give its path as the first argument)" >&2; exit 1; }
for g in ${FBT_EXPERIMENTS:-multiplier tasks ablation}; do
  echo "== grid $g"
  (set -x; "$fbt" ablate --grid "examples/experiments/$g.json" --data "$text" --out_dir "$out/$g" --jobs "${FBT_JOBS:-2}")
done
python3 scripts/multiplier.py "$out/multiplier" | tee "$out/multiplier/multiplier.md"
python3 scripts/plots.py "$out/multiplier" --out "$out/figures" --prefix multiplier_
python3 scripts/plots.py "$out/tasks" --out "$out/figures" --prefix tasks_
python3 scripts/plots.py "$out/ablation" --out "$out/figures" --prefix ablation_
