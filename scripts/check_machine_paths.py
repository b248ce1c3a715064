#!/usr/bin/env python3
"""check_machine_paths.py: fails, listing them, when tracked files name paths of a particular machine.

A path such as /opt/torch-venv, /root/..., /home/<user>/..., /work/... or /Users/... names where something
happens to live on one machine; a clone elsewhere has none of them. Code, tests and docs find such things
portably instead (an environment variable such as FBT_TORCH_PYTHON, a command-line option, python3 on PATH).

Files: `git ls-files` in the source tree when it is a git checkout, else every file under it outside build
directories. Records of past runs keep the commands as they ran and are not checked: benchmarks/results/
and the result.json files of docs/experiments/. An absolute path is one that starts a word: preceded by
the start of the line, a space, a quote, a backtick, '(', '=', ':' or ','; so tests/fuzz/work/ and
${DIR}/work/ are not flagged, nor a pattern spelled /opt/... (as this page does).

Usage: check_machine_paths.py [SOURCE_DIR]   (default: the repository this script is in)
Exit status 0 when none is found, 1 otherwise (each hit on its own line: FILE:LINE: TEXT).
Self-test: check_machine_paths.py --self-test
"""
import os
import re
import subprocess
import sys

PATTERN = re.compile(r"(?:^|(?<=[\s\"'`(=:,]))/(?:opt|root|home|work|Users|scratch)/(?!\.\.\.)")
SKIP_PREFIXES = ("benchmarks/results/",)
SKIP_RE = re.compile(r"^docs/experiments/.*/result\.json$")
BUILD_DIR_RE = re.compile(r"^(build[^/]*|\.git|__pycache__)$")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True).stdout
        return [f for f in out.decode("utf-8", "replace").split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, subdirs, names in os.walk(root):
            subdirs[:] = [s for s in subdirs if not BUILD_DIR_RE.match(s)]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def hits_in(text):
    """(line number, line) of every line of text that names a machine-specific path."""
    return [(i, line) for i, line in enumerate(text.splitlines(), 1) if PATTERN.search(line)]


def check(root):
    found = []
    for rel in sorted(tracked_files(root)):
        if rel.startswith(SKIP_PREFIXES) or SKIP_RE.match(rel) or rel == "scripts/check_machine_paths.py":
            continue
        try:
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\0" in data:  # binary (a checkpoint, an image)
            continue
        for n, line in hits_in(data.decode("utf-8", "replace")):
            found.append("%s:%d: %s" % (rel, n, line.strip()[:200]))
    return found


def self_test():
    flagged = ["python: /opt/torch-venv/bin/python", "x=/root/.pyenv/bin/python3", '"data": "/work/shared/data/a.txt"',
               "cd /home/me/fbt", "`/Users/me/x`", "/opt/fbt at the start"]
    clean = ["tests/fuzz/work/<harness>", "${CMAKE_CURRENT_BINARY_DIR}/work/${h}", "/tmp/interop", "build/tools/fbt",
             "https://example.org/home/page", "a/opt/b", "paths such as `/opt/...` or /home/..."]
    bad = [s for s in flagged if not hits_in(s)] + [s for s in clean if hits_in(s)]
    for s in bad:
        print("check_machine_paths self-test: FAIL on %r" % s)
    if not bad:
        print("check_machine_paths self-test: all passed")
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = check(root)
    for f in found:
        print(f)
    if found:
        print("check_machine_paths: %d line(s) name a path of a particular machine; use an environment variable "
              "(e.g. FBT_TORCH_PYTHON), an option or a relative path instead" % len(found))
        return 1
    print("check_machine_paths: no machine-specific path in the tracked files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
