#!/usr/bin/env bash
# Runs the experiments of docs/EXPERIMENTS.md: eight `fbt ablate` grids (examples/experiments/*.json: five of v1,
# three of the paper's recipe),
# then their tables (scripts/tables.py), the token-multiplier fit (scripts/multiplier.py) and figures
# (scripts/plots.py), next to each grid's results: OUT_DIR/<grid>/{summary.csv,runs.md,tasks.md,multiplier.md}, OUT_DIR/figures/.
#
#   bash scripts/experiments.sh [TEXT_FILE] [OUT_DIR]        (defaults: data/tinyshakespeare.txt, from scripts/get_data.sh; runs/experiments)
#
# FBT_EXPERIMENTS="multiplier multiplier_tasks stability tasks ablation paper_recipe state_tasks shakespeare_paper" picks grids (FBT_EXPERIMENTS=none: only
# the tables and figures of existing results); FBT_RESULTS_DIR copies the quoted results out (see the end); FBT_JOBS (default 2) runs at a time.
# Resumable: run it again after an interruption and finished runs are skipped. Needs a built tree
# (bash scripts/build.sh build); the figures need matplotlib (python3-matplotlib).
#
#   bash scripts/experiments.sh length [OUT_DIR]            (default runs/length): length generalisation (section 12)
#   bash scripts/experiments.sh scale [OUT_DIR]             (default runs/scale): the scale ladder of issue 48
#
# builds the Python-stdlib corpus (scripts/make_corpus.py; FBT_CORPUS=DIR uses one already built), writes one grid per
# rung (scripts/scale_grid.py), trains each with `fbt ablate` (resumable: run it again and finished runs are
# skipped), then each rung's multiplier (scripts/multiplier.py) and the ladder's table and compute
# (scripts/scale_summary.py -> OUT_DIR/scale.md, scale.json). FBT_SCALE_RUNGS (default r0,r1,r2,r3: about 7 CPU-hours
# with 3 seeds; r4, r5 are larger), FBT_SCALE_SEEDS (1,2,3), FBT_SCALE_TOKENS (1: a token budget's scale; the smoke
# run of ctest scripts.scale_smoke uses FBT_SCALE_SMOKE=1: rung r0, one seed, 1% of its tokens, a 300 KB corpus),
# FBT_JOBS (2) runs at a time; FBT_RANKS=N trains each run over N MPI ranks (mpirun -np N ... --distributed mpi,
# one run at a time; FBT_MPIRUN names the launcher) for a cluster; FBT_RESULTS_DIR copies the quoted results out.
# After each rung it measures the soft-decoding overhead at the rung's shape (build/benchmarks/bench_e2e, FBT_BENCH;
# FBT_OVERHEAD_PROCESSES processes, default 5) into OUT_DIR/<rung>/soft_overhead.jsonl; the figures go to OUT_DIR/figures.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ "${1:-}" == scale ]]; then
  out="${2:-runs/scale}"
  fbt="${FBT_BIN:-build/tools/fbt}"
  [[ -x "$fbt" ]] || { echo "experiments.sh: $fbt not found; build first: bash scripts/build.sh build" >&2; exit 1; }
  rungs="${FBT_SCALE_RUNGS:-r0,r1,r2,r3}" seeds="${FBT_SCALE_SEEDS:-1,2,3}" scale="${FBT_SCALE_TOKENS:-1}" corpus_args=()
  if [[ -n "${FBT_SCALE_SMOKE:-}" ]]; then rungs=r0 seeds=1 scale=0.01 corpus_args=(--max-bytes 300000); fi
  corpus="${FBT_CORPUS:-$out/corpus}"
  if [[ -z "${FBT_CORPUS:-}" || ! -f "$corpus/train.bin" ]]; then python3 scripts/make_corpus.py "$corpus" "${corpus_args[@]}"; fi
  mkdir -p "$out"
  python3 scripts/scale_grid.py "$out/grids" --rungs "$rungs" --seeds "$seeds" --token-scale "$scale" --list | tee "$out/rungs.md"
  launch=() dist=() jobs="${FBT_JOBS:-2}"
  if [[ "${FBT_RANKS:-1}" -gt 1 ]]; then launch=("${FBT_MPIRUN:-mpirun}" -np "$FBT_RANKS") dist=(--distributed mpi) jobs=1; fi
  for rung in ${rungs//,/ }; do
    echo "== rung $rung"
    (set -x; "${launch[@]}" "$fbt" ablate --grid "$out/grids/$rung.json" --data "$corpus/train.bin" --val_data "$corpus/val.bin" \
       --token_dtype uint16 --doc_sep_id 256 --out_dir "$out/$rung" --jobs "$jobs" "${dist[@]}")
    python3 scripts/multiplier.py "$out/$rung" --json "$out/$rung/multiplier.json" > "$out/$rung/multiplier.md"
    # the soft-decoding overhead at the rung's shape: bench_e2e's standard and soft steps in turn in one process,
    # FBT_OVERHEAD_PROCESSES (5) processes, measured here while no run trains (resumable: lines already written count)
    bench="${FBT_BENCH:-build/benchmarks/bench_e2e}" ov="$out/$rung/soft_overhead.jsonl" nproc_ov="${FBT_OVERHEAD_PROCESSES:-5}"
    if [[ -n "${FBT_SCALE_SMOKE:-}" ]]; then nproc_ov=1; fi
    if [[ -x "$bench" ]]; then
      have=0; [[ -f "$ov" ]] && have=$(wc -l < "$ov")
      for ((p = have; p < nproc_ov; p++)); do
        "$bench" --config tiny --measure soft_overhead_128 --threads 1 --reps 5 --warmup 2 $(python3 scripts/scale_grid.py --bench-args "$rung") >> "$ov"
      done
    else
      echo "experiments.sh: $bench not built (FBT_BUILD_BENCHMARKS=ON): rung $rung's soft-decoding overhead is not measured" >&2
    fi
  done
  python3 scripts/scale_summary.py "$out" --json "$out/scale.json" --plots "$out/figures" | tee "$out/scale.md"
  # FBT_RESULTS_DIR=DIR: also copy what docs/EXPERIMENTS.md quotes (the corpus manifest, the grids, the tables, each
  # run's result.json and eval.jsonl; not the corpus, checkpoints or train.jsonl) into DIR; result.json's data paths
  # (recorded absolute) are written relative to the repository root, so the record names no machine's directories
  if [[ -n "${FBT_RESULTS_DIR:-}" ]]; then
    mkdir -p "$FBT_RESULTS_DIR/grids"
    cp "$corpus/corpus.json" "$out/rungs.md" "$out/scale.md" "$out/scale.json" "$FBT_RESULTS_DIR/"
    if compgen -G "$out/figures/*.svg" > /dev/null; then mkdir -p "$FBT_RESULTS_DIR/figures" && cp "$out"/figures/*.svg "$FBT_RESULTS_DIR/figures/"; fi
    for rung in ${rungs//,/ }; do
      cp "$out/grids/$rung.json" "$FBT_RESULTS_DIR/grids/"
      mkdir -p "$FBT_RESULTS_DIR/$rung"
      cp "$out/$rung"/summary.csv "$out/$rung"/multiplier.md "$out/$rung"/multiplier.json "$FBT_RESULTS_DIR/$rung/"
      if [[ -f "$out/$rung/soft_overhead.jsonl" ]]; then cp "$out/$rung/soft_overhead.jsonl" "$FBT_RESULTS_DIR/$rung/"; fi
      for r in "$out/$rung"/*/result.json; do
        d="$FBT_RESULTS_DIR/$rung/$(basename "$(dirname "$r")")"
        mkdir -p "$d" && cp "$(dirname "$r")/eval.jsonl" "$d/" && sed "s#\"$PWD/#\"#g" "$r" > "$d/result.json"
      done
    done
  fi
  exit 0
fi
if [[ "${1:-}" == length ]]; then
  # length generalisation (EXPERIMENTS.md section 12): addition trained at 3 digits or on 1..6 digits, both models,
  # evaluated at 3, 6 and 12 digits (examples/experiments/length_generalisation.json), then each run's greedy
  # decodes (fbt eval --traces_out, standard mode) and what they write (scripts/length_traces.py). FBT_LENGTH_SMOKE=1:
  # a tiny model, 4 steps, 4 problems (ctest scripts.length_smoke).
  out="${2:-runs/length}"
  fbt="${FBT_BIN:-build/tools/fbt}"
  [[ -x "$fbt" ]] || { echo "experiments.sh: $fbt not found; build first: bash scripts/build.sh build" >&2; exit 1; }
  smoke=() n=100
  if [[ -n "${FBT_LENGTH_SMOKE:-}" ]]; then
    smoke=(--steps 4 --warmup_steps 1 --hidden_size 16 --num_hidden_layers 1 --num_attention_heads 2 --num_key_value_heads 2
           --intermediate_size 32 --batch_size 2 --eval_windows 1 --seq_eval_windows 1 --task_examples 4 --seeds 1) n=4
  fi
  (set -x; "$fbt" ablate --grid examples/experiments/length_generalisation.json --out_dir "$out" --jobs "${FBT_JOBS:-2}" "${smoke[@]}")
  python3 scripts/tables.py "$out" --kind tasks > "$out/tasks.md"
  for ck in "$out"/*/checkpoint; do
    run="$(dirname "$ck")" tr="$(dirname "$ck").traces.jsonl"
    [[ -f "$tr" ]] || "$fbt" eval --checkpoint "$ck" --windows 1 --seq_windows 0 --task_examples "$n" --eval_lengths 1,2,4 \
                               --traces_out "$tr" --traces_mode standard > "$run.traces.log"
  done
  mixed="task_max_difficulty=6+task_min_difficulty=1"  # each arm's full-bandwidth model against its baseline on the same problems
  python3 scripts/length_traces.py "$out"/*.traces.jsonl --json "$out/traces.json" --compare fuser=glu fuser=none \
    --compare doc_attention=causal+fuser=glu doc_attention=causal+fuser=none --compare "fuser=glu+$mixed" "fuser=none+$mixed" | tee "$out/traces.md"
  if [[ -n "${FBT_RESULTS_DIR:-}" ]]; then
    mkdir -p "$FBT_RESULTS_DIR"
    cp "$out"/summary.csv "$out"/tasks.md "$out"/traces.md "$out"/traces.json "$out"/*.traces.jsonl "$FBT_RESULTS_DIR/"
    for r in "$out"/*/result.json; do
      d="$FBT_RESULTS_DIR/$(basename "$(dirname "$r")")"
      mkdir -p "$d" && cp "$r" "$(dirname "$r")/eval.jsonl" "$d/"
    done
  fi
  exit 0
fi
text="${1:-data/tinyshakespeare.txt}"
out="${2:-runs/experiments}"
fbt="${FBT_BIN:-build/tools/fbt}"
[[ -x "$fbt" ]] || { echo "experiments.sh: $fbt not found; build first: bash scripts/build.sh build" >&2; exit 1; }
[[ -f "$text" ]] || { echo "experiments.sh: text file '$text' not found (bash scripts/get_data.sh fetches it, or give a text file as the first argument)" >&2; exit 1; }
all="multiplier multiplier_tasks stability tasks ablation paper_recipe state_tasks shakespeare_paper"
for g in ${FBT_EXPERIMENTS:-$all}; do
  [[ $g == none ]] && continue
  echo "== grid $g"
  data=()
  [[ $g == multiplier || $g == ablation || $g == stability || $g == shakespeare_paper ]] && data=(--data "$text")  # the text grids; the others name their task
  (set -x; "$fbt" ablate --grid "examples/experiments/$g.json" "${data[@]}" --out_dir "$out/$g" --jobs "${FBT_JOBS:-2}")
done
# a Python with matplotlib for the figures (FBT_PYTHON overrides)
py="${FBT_PYTHON:-}"
if [[ -z "$py" ]]; then
  for c in python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null && "$c" -c "import matplotlib" 2>/dev/null; then py="$c"; break; fi
  done
fi
# tables and figures of whatever grids have results
for g in multiplier multiplier_tasks paper_recipe state_tasks; do
  if [[ -f "$out/$g/summary.csv" ]]; then python3 scripts/multiplier.py "$out/$g" --json "$out/$g/multiplier.json" | tee "$out/$g/multiplier.md"; fi
done
for g in $all; do
  if [[ -f "$out/$g/summary.csv" ]]; then
    python3 scripts/tables.py "$out/$g" --kind runs > "$out/$g/runs.md"
    python3 scripts/tables.py "$out/$g" --kind contraction > "$out/$g/contraction.md"
    python3 scripts/tables.py "$out/$g" --kind positions > "$out/$g/positions.md"
  fi
done
for g in multiplier_tasks tasks; do
  if [[ -f "$out/$g/summary.csv" ]]; then python3 scripts/tables.py "$out/$g" --kind tasks > "$out/$g/tasks.md"; fi
done
for g in $all; do
  if [[ -z "$py" ]]; then echo "experiments.sh: no Python with matplotlib (apt-get install python3-matplotlib): figures skipped" >&2; break; fi
  if [[ -f "$out/$g/summary.csv" ]]; then "$py" scripts/plots.py "$out/$g" --out "$out/figures" --prefix "${g}_"; fi
done
# FBT_RESULTS_DIR=DIR: also copy what docs/EXPERIMENTS.md quotes (tables, per-run result.json and eval.jsonl,
# figures; not the checkpoints or train.jsonl) into DIR
if [[ -n "${FBT_RESULTS_DIR:-}" ]]; then
  for g in $all; do
    [[ -d "$out/$g" ]] || continue
    mkdir -p "$FBT_RESULTS_DIR/$g"
    cp "$out/$g"/*.csv "$out/$g"/*.md "$FBT_RESULTS_DIR/$g/" 2>/dev/null || true
    for r in "$out/$g"/*/result.json; do
      d="$FBT_RESULTS_DIR/$g/$(basename "$(dirname "$r")")"
      mkdir -p "$d" && cp "$r" "$(dirname "$r")/eval.jsonl" "$d/"
    done
  done
  [[ -d "$out/figures" ]] && mkdir -p "$FBT_RESULTS_DIR/figures" && cp "$out/figures"/*.svg "$FBT_RESULTS_DIR/figures/" 2>/dev/null || true
fi
exit 0
