#!/usr/bin/env bash
# Install dependencies, build fbt with its tests (build dir: build), run the whole ctest suite.
# Exit status is ctest's. Extra arguments go to ctest, e.g. scripts/test.sh -L ops.
# FBT_BUILD_DIR overrides the build directory, FBT_JOBS the parallelism (default 2),
# FBT_CMAKE_ARGS adds cmake options.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
build_dir="${FBT_BUILD_DIR:-build}"
# FBT_CMAKE_ARGS adds configure options (e.g. "-DFBT_SANITIZE=ON" for the sanitizer run in .ci/run).
# shellcheck disable=SC2086
# The unit tests share one precompiled header (FBT_TEST_PCH) and each area's files are compiled as one
# translation unit into one executable, build/tests/<area>/test_<area> (FBT_TEST_UNITY): the unit tests
# compile in about half the time (docs/PERFORMANCE.md, "Build time").
# FBT_CMAKE_ARGS="-DFBT_TEST_PCH=OFF -DFBT_TEST_UNITY=OFF" builds each test file on its own includes into
# its own executable, as a check that none misses an include. FBT_HOST_DEVICE=ON gives the command --device host
# (the CUDA backend's host stand-in), which the cli.*device_host tests drive.
bash scripts/build.sh "$build_dir" -DFBT_BUILD_TESTS=ON -DFBT_TEST_PCH=ON -DFBT_TEST_UNITY=ON -DFBT_HOST_DEVICE=ON ${FBT_CMAKE_ARGS:-}
echo "+ ctest --test-dir $build_dir --output-on-failure -j ${FBT_JOBS:-2} $*"
exec ctest --test-dir "$build_dir" --output-on-failure -j "${FBT_JOBS:-2}" "$@"
