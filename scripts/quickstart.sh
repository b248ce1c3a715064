#!/usr/bin/env bash
# Fresh Debian 12 to a first run: install dependencies, build fbt (Release, clang++ when available),
# then run the main job, `fbt demo`: it trains a baseline and a full-bandwidth model of the same size
# on the same tokens of a built-in task (a few minutes on 2 cores) and prints them side by side.
# Extra arguments go to `fbt demo` (e.g. --steps 300, --task multihop); see `build/tools/fbt demo --help`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
build_dir="${FBT_BUILD_DIR:-build}"
# Only the command is built here; scripts/test.sh builds and runs everything.
FBT_TARGETS=fbt_cli bash scripts/build.sh "$build_dir"
fbt="$build_dir/tools/fbt"
if [[ ! -x "$fbt" ]]; then
  echo "quickstart.sh: $fbt was not built" >&2
  exit 1
fi
echo "+ $fbt demo $*"
exec "$fbt" demo "$@"
