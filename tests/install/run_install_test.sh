#!/usr/bin/env bash
# Packaging tests for fbt, run by ctest (tests/CMakeLists.txt) as install.find_package and
# install.add_subdirectory; also runnable by hand:
#   bash tests/install/run_install_test.sh find_package|add_subdirectory \
#        [--source-dir DIR] [--work-dir DIR] [--cmake CMAKE] [--cxx CXX] [--generator GEN] [--make-program PROG]
# find_package:     configure fbt (tests/examples/benchmarks off), install it into a temporary
#                   prefix, then build and run tests/install/consumer against that prefix.
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
  find_package|add_subdirectory) ;;
  *) echo "usage: run_install_test.sh find_package|add_subdirectory [options]" >&2; exit 2 ;;
esac
if [[ -z "$work" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
work="$work/$mode"
rm -rf "$work"
mkdir -p "$work"

# Same compiler, generator and build type as the outer build; no package registry lookups.
common=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
[[ -n "$cxx" ]] && common+=("-DCMAKE_CXX_COMPILER=$cxx")
[[ -n "$generator" ]] && common+=(-G "$generator")
[[ -n "$make_program" ]] && common+=("-DCMAKE_MAKE_PROGRAM=$make_program")

step() { echo "== [$mode] $*"; }

if [[ "$mode" == find_package ]]; then
  prefix="$work/prefix"
  step "configure fbt from $src"
  "$cmake_bin" -S "$src" -B "$work/fbt-build" "${common[@]}" -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DFBT_BUILD_TESTS=OFF -DFBT_BUILD_EXAMPLES=OFF -DFBT_BUILD_BENCHMARKS=OFF -DFBT_BUILD_TOOLS=OFF -DFBT_WITH_CUDA=OFF
  step "install fbt into $prefix"
  "$cmake_bin" --build "$work/fbt-build"
  "$cmake_bin" --install "$work/fbt-build"
  for f in include/fbt/config.hpp include/fbt/core/params.hpp share/cmake/fbt/fbtConfig.cmake \
           share/cmake/fbt/fbtConfigVersion.cmake share/cmake/fbt/fbtTargets.cmake share/cmake/fbt/fbtIoTargets.cmake; do
    [[ -f "$prefix/$f" ]] || { echo "FAIL: $prefix/$f was not installed" >&2; exit 1; }
  done
  step "configure consumer with CMAKE_PREFIX_PATH=$prefix"
  "$cmake_bin" -S "$here/consumer" -B "$work/consumer-build" "${common[@]}" \
    -DCMAKE_PREFIX_PATH="$prefix" -DFBT_EXPECTED_PREFIX="$prefix" -DFBT_CUSTOM_FUSER_SOURCE="$src/examples/custom_fuser.cpp"
  "$cmake_bin" --build "$work/consumer-build"
  step "run consumer"
  "$work/consumer-build/consumer"
  step "run custom_fuser (a fuser of the user's own, built against the installed package)"
  "$work/consumer-build/custom_fuser" "$work/custom_fuser_run"
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
