#!/usr/bin/env python3
"""Runs one tests/python/test_*.py file with pytest against a build's extension (ctest python.<file>).

Exit 77 (ctest: Skipped) with a line saying why when the extension was not built or pytest/numpy are missing;
else pytest's status (5, no test collected, counts as a failure: a file that tests nothing is a defect).
Usage: run_pytest.py --built 0|1 --package-dir DIR --cli PATH_OR_EMPTY --plugin PATH_OR_EMPTY --work-dir DIR FILE
"""
import argparse
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--built", required=True)
    ap.add_argument("--package-dir", required=True)
    ap.add_argument("--cli", default="")
    ap.add_argument("--plugin", default="")
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("file")
    a = ap.parse_args()
    if a.built not in ("1", "ON", "TRUE", "true"):
        print("SKIPPED: the Python extension was not built in this build (FBT_BUILD_PYTHON=OFF, or nanobind or python3-dev missing: "
              "scripts/setup.sh installs them; the configure step says which)")
        return 77
    for mod in ("pytest", "numpy"):
        try:
            __import__(mod)
        except ImportError:
            print("SKIPPED: %s is not installed for %s (scripts/setup.sh installs it)" % (mod, sys.executable))
            return 77
    env = dict(os.environ)
    env["PYTHONPATH"] = a.package_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["FBT_CLI"] = a.cli
    env["FBT_TEST_WORK_DIR"] = a.work_dir
    env["FBT_PLUGIN"] = a.plugin  # examples/own_project's pieces as a plugin (liblowrank.so), when the tests built it
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    os.makedirs(a.work_dir, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", os.path.dirname(a.file), a.file]
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd, env=env, cwd=a.work_dir)


if __name__ == "__main__":
    sys.exit(main())
