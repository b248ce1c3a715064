#!/usr/bin/env bash
# Fresh Debian 12 to a first run: install dependencies, build fbt (Release, clang++ when
# available), then run the K-pass example, which builds a small full-bandwidth model, runs one
# K=3 training step and prints the per-pass losses and gradient norms.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ ! -f examples/kpass_step.cpp ]]; then
  echo "quickstart.sh: examples/kpass_step.cpp does not exist in this checkout; nothing to run" >&2
  exit 1
fi
bash scripts/setup.sh
build_dir="${FBT_BUILD_DIR:-build}"
# Only the example is built here; scripts/test.sh builds and runs everything.
FBT_TARGETS=kpass_step bash scripts/build.sh "$build_dir"
example="$build_dir/examples/kpass_step"
if [[ ! -x "$example" ]]; then
  echo "quickstart.sh: $example was not built" >&2
  exit 1
fi
echo "+ $example"
exec "$example"
