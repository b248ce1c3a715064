#!/usr/bin/env bash
# ctest install.in_source_refused: an in-source configure of fbt is refused with the command that builds out of the
# tree. Runs on a copy of the top-level files in a temporary folder (the refusal comes before any add_subdirectory),
# so the source tree itself is never configured in place.
#   bash tests/install/in_source_refused.sh SOURCE_DIR [CMAKE]
set -uo pipefail
src="$1"
cmake_bin="${2:-cmake}"
d="$(mktemp -d)"
trap 'rm -rf "$d"' EXIT
cp -r "$src/CMakeLists.txt" "$src/cmake" "$src/include" "$src/src" "$d/"
if (cd "$d" && "$cmake_bin" . >out.txt 2>&1); then
  echo "FAIL: an in-source configure was accepted" >&2
  exit 1
fi
# CMake wraps a message's lines: join them before looking for the command
joined="$(tr -s '\n ' '  ' <"$d/out.txt")"
if grep -q "CMake Error at CMakeLists.txt:[0-9]* (message): fbt: the build directory is the source directory" <<<"$joined" &&
   grep -q "build out of the tree: cmake -S . -B build" <<<"$joined"; then
  echo "refused, with the command that builds out of the tree"
  exit 0
fi
cat "$d/out.txt"
echo "FAIL: the configure failed without the refusal's message" >&2
exit 1
