#!/usr/bin/env bash
# benchmarks/compile_time.sh [SRC] [OLD_SRC] [ROUNDS]: how long a researcher's own file takes to compile (g++ -O2, one
# file at a time, user CPU seconds and peak memory from /usr/bin/time), with the compile definitions of what it links:
#   one_fuser/cli       benchmarks/compile_time/one_fuser.cpp: a fuser and fbt::cli_main, linking fbt::runtime and
#                       fbt::kernels (-DFBT_COMPILED_RUNTIME -DFBT_COMPILED_KERNELS: the commands are not compiled here)
#   one_fuser/headers   the same file with the headers only (every command compiled in it)
#   one_fuser/plugin    the same fuser as a plugin (-DFBT_PLUGIN_BUILD -shared -fPIC -fvisibility=hidden, as fbt_add_plugin)
#   own_project/main    examples/own_project/main.cpp (a fuser, a block, a policy, an optimizer; cli_main), against fbt::runtime
#   own_project/plugin  examples/own_project/plugin.cpp (the same four pieces as a plugin)
#   custom_fuser        examples/custom_fuser.cpp (a fuser, its gradient check, the trainer, the decoder through
#                       fbt/session.hpp), against fbt::runtime (-DFBT_COMPILED_RUNTIME: src/session.cpp compiled there)
#   custom_fuser/headers  the same file with the headers only (fbt/session_impl.hpp compiled in it)
# With OLD_SRC (a checkout of an earlier commit), the files that exist there are compiled against its headers too
# ("old": what the same file cost before). Prints a markdown table of medians over ROUNDS (default 1) with the range.
set -euo pipefail
src="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)"
old="${2:-}"
rounds="${3:-1}"
cxx="${CXX_TIME:-g++}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(-std=c++17 -O2 -DNDEBUG -I/usr/include/eigen3 -w)
run() {  # run NAME TREE ARGS...: one compile, appends "NAME user_s rss_mb" to $work/times
  local name=$1 tree=$2
  shift 2
  /usr/bin/time -f "%U %M" -o "$work/t" "$cxx" "${flags[@]}" -I"$tree/include" -I"$tree/examples/own_project" "$@" >/dev/null 2>"$work/err" ||
    { cat "$work/err" >&2; echo "compile_time.sh: $name failed" >&2; exit 1; }
  read -r u m <"$work/t"
  echo "$name $u $((m / 1024))" | tee -a "$work/times"
}
for ((r = 0; r < rounds; ++r)); do
  one="$src/benchmarks/compile_time/one_fuser.cpp"
  run one_fuser/cli "$src" -DFBT_COMPILED_RUNTIME -DFBT_COMPILED_KERNELS -c "$one" -o "$work/a.o"
  run one_fuser/plugin "$src" -DFBT_PLUGIN_BUILD -shared -fPIC -fvisibility=hidden -fvisibility-inlines-hidden "$one" -o "$work/a.so"
  run own_project/main "$src" -DFBT_COMPILED_RUNTIME -DFBT_COMPILED_KERNELS -c "$src/examples/own_project/main.cpp" -o "$work/b.o"
  run own_project/plugin "$src" -shared -fPIC -fvisibility=hidden -fvisibility-inlines-hidden "$src/examples/own_project/plugin.cpp" -o "$work/b.so"
  run custom_fuser "$src" -DFBT_COMPILED_RUNTIME -DFBT_COMPILED_KERNELS -c "$src/examples/custom_fuser.cpp" -o "$work/c.o"
  run custom_fuser/headers "$src" -DFBT_COMPILED_KERNELS -c "$src/examples/custom_fuser.cpp" -o "$work/h.o"
  run one_fuser/headers "$src" -c "$one" -o "$work/d.o"
  if [[ -n "$old" ]]; then
    run old:one_fuser/headers "$old" -c "$one" -o "$work/e.o"
    run old:own_project/main "$old" -DFBT_COMPILED_KERNELS -c "$old/examples/own_project/main.cpp" -o "$work/f.o"
    run old:custom_fuser "$old" -DFBT_COMPILED_KERNELS -c "$old/examples/custom_fuser.cpp" -o "$work/g.o"
  fi
done
python3 - "$work/times" "$cxx" <<'PY'
import collections, statistics, subprocess, sys
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    n, u, m = line.split()
    rows.setdefault(n, []).append((float(u), int(m)))
ver = subprocess.run([sys.argv[2], "--version"], capture_output=True, text=True).stdout.splitlines()[0]
print("\n%s -O2, user CPU seconds (median [min-max] over rounds) and peak memory\n" % ver)
print("| file | user s | peak MB |\n|---|---:|---:|")
for n, v in rows.items():
    us = [x[0] for x in v]
    print("| %s | %.1f [%.1f-%.1f] | %d |" % (n, statistics.median(us), min(us), max(us), max(x[1] for x in v)))
PY
