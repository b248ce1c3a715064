#!/usr/bin/env bash
# Configure and build fbt in Release: scripts/build.sh [BUILD_DIR] [extra cmake -D options...]
# Compiler: $CXX if set, else clang++ (clang++-14) when available, else g++. On an existing build
# directory the compiler it was configured with is kept. Parallel jobs: $FBT_JOBS (default 2).
# $FBT_TARGETS (space-separated) builds only those targets instead of everything.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir="${1:-build}"
shift || true
jobs="${FBT_JOBS:-2}"

args=(-S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release)
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cxx="${CXX:-}"
  if [[ -z "$cxx" ]]; then
    for c in clang++ clang++-14 g++; do
      if command -v "$c" >/dev/null 2>&1; then cxx="$c"; break; fi
    done
  fi
  [[ -n "$cxx" ]] && args+=("-DCMAKE_CXX_COMPILER=$cxx")
fi

echo "+ cmake ${args[*]} $*"
cmake "${args[@]}" "$@"
targets=()
if [[ -n "${FBT_TARGETS:-}" ]]; then
  # shellcheck disable=SC2206
  targets=(--target ${FBT_TARGETS})
fi
echo "+ cmake --build $build_dir -j $jobs ${targets[*]}"
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
