#!/usr/bin/env python3
"""The pip path without a second compile (ctest install.python_package): pyproject.toml says what `pip install .`
builds, and the CMake install rule of component "python" (what scikit-build-core installs into the wheel) lays out
an importable package with this build's extension.

1. pyproject.toml: scikit-build-core with nanobind as build requirements; the wheel's package is python/fbt
   (its __init__.py exists); install.components is ["python"]; the CMake options turn the extension on and
   the tests, examples, benchmarks, tools, CUDA and -march=native off; the readme exists.
2. cmake --install BUILD --component python --prefix TMP, plus python/fbt/*.py as the wheel adds them, then a
   fresh interpreter with only TMP on its path imports fbt from TMP, finds the stubs, builds and decodes a model;
3. the `fbt` command of the package (project.scripts fbt = fbt.__main__:main, and python -m fbt): its help, a
   refusal, a 2-step training run.
Usage: check_package.py --source-dir DIR --build-dir DIR --cmake CMAKE --work-dir DIR. Exit 0 on success.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_pyproject(path):
    text = open(path, encoding="utf-8").read()
    try:
        import tomllib  # Python 3.11+
        return tomllib.loads(text)
    except ImportError:
        pass
    try:
        import tomli
        return tomli.loads(text)
    except ImportError:
        return None


def check_pyproject(src):
    path = os.path.join(src, "pyproject.toml")
    if not os.path.exists(path):
        fail("pyproject.toml is missing at the repository root")
    t = read_pyproject(path)
    if t is None:
        print("note: no TOML reader (Python < 3.11 without tomli): pyproject.toml checked by patterns only")
        text = open(path, encoding="utf-8").read()
        for pat in (r'build-backend\s*=\s*"scikit_build_core.build"', r'wheel.packages\s*=\s*\["python/fbt"\]',
                    r'install.components\s*=\s*\["python"\]', r'FBT_BUILD_PYTHON\s*=\s*"ON"', r'FBT_NATIVE\s*=\s*"OFF"'):
            if not re.search(pat, text):
                fail("pyproject.toml lacks %s" % pat)
        return
    bs = t["build-system"]
    if bs.get("build-backend") != "scikit_build_core.build":
        fail("build-backend is %r, expected scikit_build_core.build" % bs.get("build-backend"))
    reqs = " ".join(bs.get("requires", []))
    for r in ("scikit-build-core", "nanobind"):
        if r not in reqs:
            fail("build-system.requires lacks %s" % r)
    sk = t["tool"]["scikit-build"]
    pk = sk.get("wheel", {}).get("packages", [])
    if pk != ["python/fbt"] or not os.path.exists(os.path.join(src, "python", "fbt", "__init__.py")):
        fail("wheel.packages is %r; expected ['python/fbt'] with python/fbt/__init__.py" % (pk,))
    if sk.get("install", {}).get("components") != ["python"]:
        fail("install.components is %r, expected ['python'] (the CMake install component of the extension)" % sk.get("install"))
    d = sk.get("cmake", {}).get("define", {})
    want = {"FBT_BUILD_PYTHON": "ON", "FBT_NATIVE": "OFF", "FBT_BUILD_TESTS": "OFF", "FBT_BUILD_EXAMPLES": "OFF",
            "FBT_BUILD_BENCHMARKS": "OFF", "FBT_BUILD_TOOLS": "OFF", "FBT_WITH_CUDA": "OFF"}
    for k, v in want.items():
        if str(d.get(k)).upper() != v:
            fail("tool.scikit-build.cmake.define.%s is %r, expected %s" % (k, d.get(k), v))
    scripts = t["project"].get("scripts", {})
    if scripts.get("fbt") != "fbt.__main__:main" or not os.path.exists(os.path.join(src, "python", "fbt", "__main__.py")):
        fail("project.scripts.fbt is %r; expected 'fbt.__main__:main' (the `fbt` command pip puts on PATH) with python/fbt/__main__.py"
             % (scripts.get("fbt"),))
    readme = t["project"].get("readme")
    if readme and not os.path.exists(os.path.join(src, readme)):
        fail("project.readme %s does not exist" % readme)
    print("pyproject.toml: scikit-build-core, package python/fbt, component python, %d CMake options checked" % len(want))


def check_install(src, build, cmake, work):
    prefix = os.path.join(work, "site")
    shutil.rmtree(prefix, ignore_errors=True)
    r = subprocess.run([cmake, "--install", build, "--component", "python", "--prefix", prefix], capture_output=True, text=True)
    if r.returncode != 0:
        fail("cmake --install --component python failed: " + r.stderr)
    pkg = os.path.join(prefix, "fbt")
    ext = glob.glob(os.path.join(pkg, "_fbt*.so")) + glob.glob(os.path.join(pkg, "_fbt*.pyd"))
    if not ext:
        fail("the install rule put no extension _fbt into %s: %s" % (pkg, os.listdir(prefix) if os.path.isdir(prefix) else "nothing"))
    if not os.path.exists(os.path.join(pkg, "_fbt.pyi")):
        fail("the install rule put no stubs _fbt.pyi into %s" % pkg)
    import ast
    stubs = open(os.path.join(pkg, "_fbt.pyi"), encoding="utf-8").read()
    ast.parse(stubs)  # a stub an editor cannot read is a defect
    for name in ("class ModelConfig", "class Model", "class Decoder", "def logits", "def generate"):
        if name not in stubs:
            fail("the stubs lack %s" % name)
    others = [p for p in os.listdir(prefix) if p != "fbt"]
    if others:
        fail("component python installed more than the package: %s" % others)
    for f in glob.glob(os.path.join(src, "python", "fbt", "*.py")) + glob.glob(os.path.join(src, "python", "fbt", "py.typed")):
        shutil.copy(f, pkg)  # what wheel.packages adds
    code = ("import fbt, os, sys; assert os.path.dirname(fbt.__file__) == %r, fbt.__file__; "
            "m = fbt.Model(dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, num_key_value_heads=2), seed=1); "
            "out = fbt.Decoder(m).generate('hi', greedy=True, max_new_tokens=3); assert out.shape == (3,); print('imported', fbt.__version__)") % pkg
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = prefix
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=work)
    if r.returncode != 0:
        fail("the installed package does not import and run: " + r.stderr)
    print("installed component python: %s, stubs, and the .py files import and decode (%s)" % (os.path.basename(ext[0]), r.stdout.strip()))
    # the console script `fbt` (project.scripts: what pip writes is `sys.exit(fbt.__main__.main())` with argv[0] its path)
    # and `python -m fbt`: the command's help, a refusal's status and line, and a short training run
    script = "import sys; from fbt.__main__ import main; sys.argv[0] = '/venv/bin/fbt'; sys.exit(main())"
    r = subprocess.run([sys.executable, "-c", script, "--help"], capture_output=True, text=True, env=env, cwd=work)
    if r.returncode != 0 or "usage: fbt <command>" not in r.stdout:
        fail("the console script fbt --help: status %d, %r %r" % (r.returncode, r.stdout[-300:], r.stderr[-300:]))
    r = subprocess.run([sys.executable, "-m", "fbt", "train", "--steps", "0"], capture_output=True, text=True, env=env, cwd=work)
    if r.returncode != 1 or "fbt train: error:" not in r.stderr or "steps" not in r.stderr:
        fail("python -m fbt train --steps 0: expected status 1 and one error line naming steps, got %d %r" % (r.returncode, r.stderr[-300:]))
    run = os.path.join(work, "cmd_run")
    shutil.rmtree(run, ignore_errors=True)
    r = subprocess.run([sys.executable, "-m", "fbt", "train", "--hidden_size", "16", "--num_hidden_layers", "1", "--num_attention_heads", "2",
                        "--num_key_value_heads", "1", "--intermediate_size", "32", "--seq_len", "16", "--batch_size", "2", "--steps", "2",
                        "--eval_windows", "1", "--seq_eval_windows", "0", "--monitor_passes", "0", "--task_difficulty", "1", "--progress", "false",
                        "--out_dir", run], capture_output=True, text=True, env=env, cwd=work)
    if r.returncode != 0 or not os.path.exists(os.path.join(run, "checkpoint", "model.safetensors")):
        fail("python -m fbt train (2 steps): status %d, %r" % (r.returncode, r.stderr[-500:]))
    print("the command from the package: fbt --help, a refusal (status 1, one line) and a 2-step run through python -m fbt")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--cmake", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    check_pyproject(a.source_dir)
    check_install(a.source_dir, a.build_dir, a.cmake, a.work_dir)
    print("check_package: all passed")


if __name__ == "__main__":
    main()
