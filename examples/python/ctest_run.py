#!/usr/bin/env python3
"""Runs one example of examples/python/ under ctest (example.python.<name>): with the build tree's package on
sys.path, in the current directory (ctest's working directory: build/examples/python), with the given arguments.
Exits 77 (ctest: Skipped) with a message when the extension was not built or does not import.

    ctest_run.py --package-dir BUILD/python EXAMPLE.py [ARGS...]
"""
import os
import runpy
import sys


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[0] != "--package-dir":
        print(__doc__)
        return 2
    pkg, script, rest = args[1], args[2], args[3:]
    sys.path.insert(0, pkg)
    try:
        import fbt  # noqa: F401
    except ImportError as e:
        print(f"skipped: the fbt module is not importable from {pkg} ({e}); build with -DFBT_BUILD_PYTHON=ON (docs/python.md)")
        return 77
    sys.argv = [script, *rest]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
