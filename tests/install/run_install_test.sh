#!/usr/bin/env bash
# Packaging tests for fbt, run by ctest (tests/CMakeLists.txt) as install.prefix, install.find_package,
# install.own_project and install.add_subdirectory; also runnable by hand:
#   bash tests/install/run_install_test.sh prefix|find_package|own_project|add_subdirectory \
#        [--source-dir DIR] [--work-dir DIR] [--cmake CMAKE] [--cxx CXX] [--generator GEN] [--make-program PROG]
# prefix:           configure fbt (tests/examples/benchmarks/tools/CUDA/Python off), install it into
#                   WORK/fbt-prefix and check the installed files. find_package and own_project build against
#                   that one prefix (ctest: the fixture install.prefix, so fbt's kernels are compiled once,
#                   not once per test); run by hand, they use WORK/fbt-prefix when it holds an fbt (mode
#                   prefix refreshes it) and install one there first otherwise.
# find_package:     build and run tests/install/consumer against the prefix.
# own_project:      build examples/own_project against the prefix and run its command through the loop.
# add_subdirectory: build and run tests/install/subdir_consumer, which vendors the fbt source
#                   tree and checks that fbt adds no tests/examples/benchmarks of its own.
set -euo pipefail

mode="${1:-}"
shift || true
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/../.." && pwd)"
work=""
cmake_bin="cmake"
cxx="${CXX:-}"
generator=""
make_program=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --source-dir) src="$2"; shift 2 ;;
    --work-dir) work="$2"; shift 2 ;;
    --cmake) cmake_bin="$2"; shift 2 ;;
    --cxx) cxx="$2"; shift 2 ;;
    --generator) generator="$2"; shift 2 ;;
    --make-program) make_program="$2"; shift 2 ;;
    *) echo "run_install_test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$mode" in
  prefix|find_package|add_subdirectory|own_project) ;;
  *) echo "usage: run_install_test.sh prefix|find_package|add_subdirectory|own_project [options]" >&2; exit 2 ;;
esac
if [[ -z "$work" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
# the installed fbt that find_package and own_project share (mode prefix makes it)
prefix="$work/fbt-prefix"
work="$work/$mode"
rm -rf "$work"
mkdir -p "$work"

# Same compiler, generator and build type as the outer build; no package registry lookups.
common=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
[[ -n "$cxx" ]] && common+=("-DCMAKE_CXX_COMPILER=$cxx")
[[ -n "$generator" ]] && common+=(-G "$generator")
[[ -n "$make_program" ]] && common+=("-DCMAKE_MAKE_PROGRAM=$make_program")

step() { echo "== [$mode] $*"; }

# install_prefix: configure fbt from $src, install it into $prefix, check the files a consumer needs
install_prefix() {
  rm -rf "$prefix"
  step "configure fbt from $src"
  "$cmake_bin" -S "$src" -B "$work/fbt-build" "${common[@]}" -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DFBT_BUILD_TESTS=OFF -DFBT_BUILD_EXAMPLES=OFF -DFBT_BUILD_BENCHMARKS=OFF -DFBT_BUILD_TOOLS=OFF -DFBT_WITH_CUDA=OFF -DFBT_BUILD_PYTHON=OFF
  step "install fbt into $prefix"
  "$cmake_bin" --build "$work/fbt-build"
  "$cmake_bin" --install "$work/fbt-build"
  for f in include/fbt/config.hpp include/fbt/core/params.hpp include/fbt/cli.hpp include/fbt/plugin.hpp share/cmake/fbt/fbtConfig.cmake \
           share/cmake/fbt/fbtConfigVersion.cmake share/cmake/fbt/fbtTargets.cmake share/cmake/fbt/fbtIoTargets.cmake \
           share/cmake/fbt/fbtCliTargets.cmake share/cmake/fbt/fbtRuntimeTargets.cmake share/cmake/fbt/fbtHelpers.cmake; do
    [[ -f "$prefix/$f" ]] || { echo "FAIL: $prefix/$f was not installed" >&2; exit 1; }
  done
}
# need_prefix: the prefix install.prefix made, or (a run by hand without it) a fresh one
need_prefix() {
  if [[ -f "$prefix/share/cmake/fbt/fbtConfig.cmake" ]]; then
    step "use the installed fbt in $prefix"
  else
    install_prefix
  fi
}

if [[ "$mode" == prefix ]]; then
  install_prefix
  step "PASS"
  exit 0
fi

if [[ "$mode" == own_project ]]; then
  # examples/own_project against the installed package: its command (mytool) runs the research loop on the
  # project's own fuser (lowrank, option rank), decoding policy (soft_first) and optimizer (sgdm)
  need_prefix
  step "build examples/own_project (find_package(fbt COMPONENTS cli), the plugin, and the stock command from fbt::runtime)"
  "$cmake_bin" -S "$src/examples/own_project" -B "$work/own-build" "${common[@]}" -DCMAKE_PREFIX_PATH="$prefix" -DFBT_STOCK_MAIN="$src/tools/fbt.cpp"
  "$cmake_bin" --build "$work/own-build"
  [[ -f "$work/own-build/liblowrank.so" ]] || { echo "FAIL: fbt_add_plugin did not build liblowrank.so" >&2; exit 1; }
  [[ -x "$work/own-build/stock_fbt" ]] || { echo "FAIL: the installed fbt has no fbt::runtime (the stock command was not built)" >&2; exit 1; }
  tool="$work/own-build/mytool"
  run="$work/runs"
  tiny=(--hidden_size 32 --num_hidden_layers 2 --num_attention_heads 2 --num_key_value_heads 1 --intermediate_size 64 --seq_len 32
        --batch_size 4 --eval_windows 2 --seq_eval_windows 1 --monitor_passes 2 --data task:running_sum --task_length 12 --progress false)
  expect() {  # expect PATTERN CMD...: runs CMD, prints its output, fails unless it exits 0 and prints PATTERN
    local pat="$1"; shift
    local out
    out="$("$@" 2>&1)" || { echo "$out"; echo "FAIL: exit status $? of: $*" >&2; exit 1; }
    echo "$out"
    grep -Ezq -- "$pat" <<<"$out" || { echo "FAIL: no \"$pat\" in the output of: $*" >&2; exit 1; }
  }
  step "the command knows the project's pieces and their options"
  expect "fuser +lowrank +rank \\(an integer in \\[1, 1024\\], default 8\\)" "$tool" train --help
  expect "block +gated_attn +gate_init" "$tool" train --help
  expect "optimizer +sgdm +momentum" "$tool" train --help
  expect "soft_first" "$tool" sample --help
  step "the project's fuser and block against central finite differences"
  "$work/own-build/check_pieces"
  step "train the user fuser, block and optimizer with their options; 4 + 4 resumed steps = 8 steps, bit for bit"
  # a constant LR and feedback from step 0: the run's length changes no step's math, so 4 steps then a
  # resume to 8 (in the same out_dir, whose path the state records) must give the 8-step run's files
  own=(--fuser lowrank --fuser.rank 4 --block gated_attn --block.gate_init 0.8 --optimizer sgdm --optimizer.momentum 0.8 --lr 0.05
       --lr_schedule constant --warmup_steps 0 --feedback_start 0 --checkpoint_every 4)
  expect "eval @ step 8" "$tool" train "${tiny[@]}" "${own[@]}" --steps 8 --out_dir "$run/full"
  mv "$run/full" "$run/straight"
  expect "eval @ step 4" "$tool" train "${tiny[@]}" "${own[@]}" --steps 4 --out_dir "$run/full"
  expect "eval @ step 8" "$tool" train --resume "$run/full/checkpoint" --steps 8 --out_dir "$run/full"
  for f in model.safetensors train_state.safetensors; do
    cmp "$run/straight/checkpoint/$f" "$run/full/checkpoint/$f" || { echo "FAIL: the resumed run's $f differs from the straight run's" >&2; exit 1; }
  done
  step "refusals name the option"
  if out="$("$tool" train "${tiny[@]}" --fuser lowrank --fuser.rank 0 --out_dir "$run/bad" 2>&1)"; then echo "FAIL: rank 0 accepted" >&2; exit 1; fi
  grep -q "fuser_options.rank: must be in \[1, 1024\], got 0" <<<"$out" || { echo "$out"; echo "FAIL: rank 0 not named" >&2; exit 1; }
  step "eval, sample in every mode (the user policy too), logits, export plain and full"
  expect "fuser lowrank.*pass 2 validation loss" "$tool" eval --checkpoint "$run/full/checkpoint" --windows 2 --seq_windows 1 --monitor 0
  for mode in standard soft "fused(2)" "soft_first(3)"; do
    expect "sample 1 \\($(sed 's/[()]/\\&/g' <<<"$mode")" "$tool" sample --checkpoint "$run/full/checkpoint" --prompt "0123" --mode "$mode" --temperature 0 --max_new_tokens 6
  done
  expect "3 passes x" "$tool" logits --checkpoint "$run/full/checkpoint" --text "0123" --out "$work/logits.npy"
  # a Qwen3 directory holds the built-in decoder block only: the gated block's model is refused by name,
  # the user fuser's (on the decoder block) exports plain and full
  if out="$("$tool" export --checkpoint "$run/full/checkpoint" --hf "$work/hf_gated" 2>&1)"; then echo "FAIL: a gated_attn model exported to HF" >&2; exit 1; fi
  grep -q 'block "gated_attn"' <<<"$out" || { echo "$out"; echo "FAIL: the export refusal does not name the block" >&2; exit 1; }
  expect "eval @ step 4" "$tool" train "${tiny[@]}" --fuser lowrank --fuser.rank 4 --steps 4 --feedback_start 0.25 --out_dir "$run/decoder"
  expect "Qwen3ForCausalLM \\(the plain part\\)" "$tool" export --checkpoint "$run/decoder/checkpoint" --hf "$work/hf_plain" --plain true
  expect "the feedback tensors of a user's fuser" "$tool" export --checkpoint "$run/decoder/checkpoint" --hf "$work/hf_full"
  grep -q '"rank": *4' "$work/hf_full/config.json" || { echo "FAIL: the full export does not record fuser_options.rank" >&2; exit 1; }
  expect "sample 1 \\(soft" "$tool" sample --checkpoint "$work/hf_full" --prompt "0123" --temperature 0 --max_new_tokens 4
  expect "fuser none.*pass 1 validation loss" "$tool" eval --checkpoint "$work/hf_plain" --data task:running_sum --task_length 12 --seq_len 32 \
    --windows 2 --seq_windows 1 --monitor 0
  step "ablate a 2x2 grid over the user fuser and its rank (glu's two runs are one)"
  expect "same run as fuser=glu\\+fuser.rank=4\\+seed=1" "$tool" ablate "${tiny[@]}" --vary "fuser=glu|lowrank" --vary "fuser.rank=4|8" \
    --tokens 2000 --evals 1 --task_examples 0 --decode_timing 0 --out_dir "$run/grid"
  grep -q "fuser=lowrank+fuser.rank=8+seed=1" "$run/grid/summary.csv" || { echo "FAIL: summary.csv lacks the rank-8 run" >&2; exit 1; }
  step "the stock command of the installed runtime with the project's plugin: train, resume, sample in the plugin's mode"
  stock="$work/own-build/stock_fbt"
  plug=(--plugin "$work/own-build/liblowrank.so")
  expect "eval @ step 4" "$stock" train "${plug[@]}" "${tiny[@]}" "${own[@]}" --steps 4 --out_dir "$run/stock"
  expect "eval @ step 8" "$stock" train "${plug[@]}" --resume "$run/stock/checkpoint" --steps 8 --out_dir "$run/stock"
  # the tensors byte for byte (the plugin's checkpoint also records its plugin in __metadata__)
  same_tensors() {
    python3 - "$1" "$2" <<'PY'
import json, struct, sys
def tensors(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    head.pop("__metadata__", None)
    return head, b[8 + n:]
sys.exit(0 if tensors(sys.argv[1]) == tensors(sys.argv[2]) else 1)
PY
  }
  for f in model.safetensors train_state.safetensors; do
    same_tensors "$run/straight/checkpoint/$f" "$run/stock/checkpoint/$f" || { echo "FAIL: the plugin's run ($f) differs from the command's" >&2; exit 1; }
  done
  grep -q '"plugins"' "$run/stock/checkpoint/model.safetensors" || { echo "FAIL: the plugin's checkpoint does not record its plugin" >&2; exit 1; }
  expect "sample 1 \\(soft_first\\(3\\)" "$stock" sample "${plug[@]}" --checkpoint "$run/stock/checkpoint" --prompt "0123" --mode "soft_first(3)" \
    --temperature 0 --max_new_tokens 6
  if out="$("$stock" sample --checkpoint "$run/stock/checkpoint" --prompt "0123" 2>&1)"; then echo "FAIL: loaded without its plugin" >&2; exit 1; fi
  grep -q 'made with plugin liblowrank.so' <<<"$out" || { echo "$out"; echo "FAIL: the refusal does not name the plugin" >&2; exit 1; }
  echo "own_project: every command ran on the project's own types, compiled in and as a plugin of the stock command"
  exit 0
fi

if [[ "$mode" == find_package ]]; then
  need_prefix
  step "configure consumer with CMAKE_PREFIX_PATH=$prefix"
  "$cmake_bin" -S "$here/consumer" -B "$work/consumer-build" "${common[@]}" \
    -DCMAKE_PREFIX_PATH="$prefix" -DFBT_EXPECTED_PREFIX="$prefix" -DFBT_CUSTOM_FUSER_SOURCE="$src/examples/custom_fuser.cpp"
  "$cmake_bin" --build "$work/consumer-build"
  step "run consumer"
  "$work/consumer-build/consumer"
  step "run custom_fuser (a fuser of the user's own, built against the installed package)"
  "$work/consumer-build/custom_fuser" "$work/custom_fuser_run"
  if [[ -f "$prefix/share/cmake/fbt/fbtRuntimeTargets.cmake" ]]; then
    step "run custom_fuser_runtime (the same file against the installed fbt::runtime: the loop compiled once)"
    [[ -x "$work/consumer-build/custom_fuser_runtime" ]] || { echo "FAIL: fbt::runtime was installed but custom_fuser_runtime was not built" >&2; exit 1; }
    "$work/consumer-build/custom_fuser_runtime" "$work/custom_fuser_runtime_run"
  fi
  if [[ -f "$prefix/share/cmake/fbt/fbtMpiTargets.cmake" ]]; then
    step "run mpi_consumer (fbt::mpi from the installed package)"
    [[ -x "$work/consumer-build/mpi_consumer" ]] || { echo "FAIL: fbt::mpi was installed but the consumer did not find it" >&2; exit 1; }
    "$work/consumer-build/mpi_consumer"
  fi
else
  step "configure subdir_consumer with FBT_SOURCE_DIR=$src"
  "$cmake_bin" -S "$here/subdir_consumer" -B "$work/build" "${common[@]}" -DFBT_SOURCE_DIR="$src"
  "$cmake_bin" --build "$work/build"
  [[ ! -e "$work/build/fbt-build/tests" ]] || { echo "FAIL: fbt created its tests/ build dir as a subproject" >&2; exit 1; }
  step "run subdir_consumer"
  "$work/build/subdir_consumer"
fi
step "PASS"
