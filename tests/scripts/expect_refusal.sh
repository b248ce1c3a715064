#!/usr/bin/env bash
# tests/scripts/expect_refusal.sh: runs one `fbt` command that must be refused and checks the
# three things a refusal promises: exit status 1, exactly one line on stderr, and that line matching REGEX
# (the option or file and the value it names). The command runs under a time limit, so one that blocks
# (a FIFO opened for reading) or runs away (a huge allocation) fails instead of hanging the suite.
#
#   expect_refusal.sh [--mkfifo PATH] [--mkdir PATH] [--file PATH TEXT] [--empty PATH] [--limit SECONDS] REGEX -- COMMAND [ARGS...]
#
# --mkfifo / --mkdir / --file / --empty (an empty file: CMake drops an empty TEXT) create the hostile input first (removing what was there); the options may
# come before or after REGEX. REGEX is an extended regular expression (grep -E). Callers from CMake
# avoid unbalanced square brackets in it: CMake does not split a list inside them.
set -u
limit=60
regex=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --mkfifo) rm -rf "$2"; mkdir -p "$(dirname "$2")"; mkfifo "$2" || exit 2; shift 2 ;;
    --mkdir) rm -rf "$2"; mkdir -p "$2" || exit 2; shift 2 ;;
    --file) rm -rf "$2"; mkdir -p "$(dirname "$2")"; printf '%s' "$3" > "$2" || exit 2; shift 3 ;;
    --empty) rm -rf "$2"; mkdir -p "$(dirname "$2")"; : > "$2" || exit 2; shift 2 ;;
    --limit) limit="$2"; shift 2 ;;
    *) regex="$1"; shift ;;
  esac
done
[ "${1:-}" = "--" ] && shift
if [ -z "$regex" ] || [ $# -eq 0 ]; then echo "usage: expect_refusal.sh [options] REGEX -- COMMAND [ARGS...]"; exit 2; fi
err=$(mktemp)
out=$(mktemp)
trap 'rm -f "$err" "$out"' EXIT
timeout -k 5 "$limit" "$@" >"$out" 2>"$err"
rc=$?
lines=$(wc -l <"$err")
echo "command: $*"
echo "exit status: $rc; stderr lines: $lines"
echo "--- stderr"
head -c 2000 "$err"
echo "--- stdout (first 500 bytes)"
head -c 500 "$out"
echo "---"
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "FAIL: timed out after $limit s (blocked or ran away)"; exit 1; fi
if [ "$rc" -ne 1 ]; then echo "FAIL: exit status $rc, expected 1"; exit 1; fi
if [ "$lines" -ne 1 ]; then echo "FAIL: $lines lines on stderr, expected exactly 1"; exit 1; fi
if ! grep -Eq -- "$regex" "$err"; then echo "FAIL: stderr does not match /$regex/"; exit 1; fi
echo "PASS"
