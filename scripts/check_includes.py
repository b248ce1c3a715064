#!/usr/bin/env python3
"""check_includes.py: the headers of include/fbt include one way, down the floors (docs/architecture.md, section 5).

Every `#include "..."` of a header under include/fbt is resolved to a path and both ends are placed on a floor:

  floor 8  apps         cli/, cli.hpp, ablate.hpp, fbt.hpp,   the `fbt` command, the ablation driver, the umbrella,
                        python/, python.hpp,                  the Python bindings, plugins (loading one; what a
                        plugins.hpp, plugin.hpp,              plugin's file includes; the loop as plain functions)
                        session.hpp, session_impl.hpp
  floor 7  train        train/                                trainer, optimizers, clipping, schedules, evaluation
  floor 6  step/decode  decode/, dist/, check/, cuda/         the decoder, the distributed step, the checkers (run a
                                                              model), the CUDA backend and its engine
  floor 5  model        model/                                the model, its config, one pass, the K-pass step
  floor 4  layers       layers/                               blocks, attention, MLP, fusers, the fused input
  floor 3  backend      backend/                              the backend contract and the CPU backend
  floor 2  ops          ops/, xt/                             free kernels; xtensor views of the store (optional)
  floor 1  core         core/, detail/                        tensors, params, arena, rng, options; internal helpers
  floor 0  base         config.hpp                            version and assertion macros

A header may include headers of its own floor or of a lower one. Beside the floors stand
  io/    (files: safetensors, npy, JSON, configs, checkpoints, Hugging Face directories): it may include floors
         0-5 (it reads and writes configs and models) and io/;
  data/  (tokens, tokenizers, tasks): it may include floors 0-1 and io/ (token files);
and both may be included from floor 6 up (and by each other as stated). An include that breaks the rule fails the
check with a line naming the file, the include and the floors. ALLOWLIST holds known breaks that are being fixed
elsewhere; it is printed on every run, and an entry that no longer occurs fails the check (so it is removed).

Usage: check_includes.py [SOURCE_DIR]   (default: the repository this script is in)
Exit status 0 when every include goes down (or is allowlisted), 1 otherwise. Self-test: check_includes.py --self-test
"""
import os
import re
import sys

FLOORS = [  # (floor name, path prefixes under include/fbt/)
    ("base", ["config.hpp"]),
    ("core", ["core/", "detail/"]),
    ("ops", ["ops/", "xt/"]),
    # the CUDA backend's own headers sit beside the CPU's; cuda/cuda.cuh is an umbrella (with the step, the
    # decoder and the device optimizer), as fbt.hpp is
    ("backend", ["backend/", "cuda/backend.cuh", "cuda/buffer.cuh", "cuda/check.cuh", "cuda/device.cuh", "cuda/gemm.cuh",
                 "cuda/kernels.cuh"]),
    ("layers", ["layers/"]),
    ("model", ["model/"]),
    ("step/decode", ["decode/", "dist/", "check/"]),
    ("train", ["train/"]),
    ("apps", ["cli/", "cli.hpp", "ablate.hpp", "fbt.hpp", "cuda/cuda.cuh", "python/", "python.hpp", "plugins.hpp", "plugin.hpp",
              "session.hpp", "session_impl.hpp"]),
]
BESIDE = {  # area -> (highest floor it may include, lowest floor that may include it, beside areas it may include)
    "io": (5, 6, {"io"}),
    "data": (1, 6, {"io", "data"}),
}

# Known breaks, fixed in parallel work: (file, include), both relative to include/fbt/. Printed when the check runs.
ALLOWLIST = [
]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def area_of(rel):
    """('floor', index) or ('beside', name) for a path relative to include/fbt/; None when it is outside the tree."""
    for i, (_, prefixes) in enumerate(FLOORS):
        for p in prefixes:
            if rel == p or (p.endswith("/") and rel.startswith(p)):
                return ("floor", i)
    top = rel.split("/", 1)[0]
    if top in BESIDE and "/" in rel:
        return ("beside", top)
    return None


def describe(a):
    if a is None:
        return "no floor"
    if a[0] == "floor":
        return "floor %d (%s)" % (a[1], FLOORS[a[1]][0])
    hi, lo, _ = BESIDE[a[1]]
    return "%s/ (beside: may include floors 0-%d, included from floor %d up)" % (a[1], hi, lo)


def allowed(src, dst):
    if src is None or dst is None:
        return False
    if src[0] == "floor" and dst[0] == "floor":
        return dst[1] <= src[1]
    if src[0] == "floor":  # a floor including io/ or data/
        return src[1] >= BESIDE[dst[1]][1]
    hi, _, others = BESIDE[src[1]]
    if dst[0] == "floor":
        return dst[1] <= hi
    return dst[1] in others


def includes(root):
    """(file, include) pairs, both relative to include/fbt/, of every quoted include under include/fbt."""
    base = os.path.join(root, "include", "fbt")
    pairs = []
    for d, _, names in os.walk(base):
        for n in sorted(names):
            if not n.endswith((".hpp", ".cuh", ".h")):
                continue
            path = os.path.join(d, n)
            rel = os.path.relpath(path, base).replace(os.sep, "/")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE_RE.findall(text):
                target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
                if not os.path.exists(target) and inc.startswith("fbt/"):  # "fbt/..." from the include directory
                    target = os.path.normpath(os.path.join(root, "include", inc))
                pairs.append((rel, os.path.relpath(target, base).replace(os.sep, "/")))
    return sorted(pairs)


def check(pairs):
    """(errors, allowlisted hits): one line per include that goes up or sideways."""
    errors, hits = [], set()
    for f, inc in pairs:
        if inc.startswith(".."):
            errors.append("include/fbt/%s: includes \"%s\", outside include/fbt" % (f, inc))
            continue
        src, dst = area_of(f), area_of(inc)
        if allowed(src, dst):
            continue
        if (f, inc) in ALLOWLIST:
            hits.add((f, inc))
            continue
        errors.append("include/fbt/%s: includes %s, but %s is on %s and %s is on %s" % (f, inc, f, describe(src), inc, describe(dst)))
    for a in ALLOWLIST:
        if a not in hits:
            errors.append("allowlist entry %s -> %s no longer occurs: remove it from scripts/check_includes.py" % a)
    return errors, hits


def self_test():
    ok = True

    def expect(cond, what):
        nonlocal ok
        if not cond:
            print("FAIL:", what)
            ok = False

    e, _ = check([("layers/block.hpp", "model/config.hpp")] + list(ALLOWLIST))
    expect(len(e) == 1 and "layers/block.hpp" in e[0] and "model/config.hpp" in e[0] and "floor 4 (layers)" in e[0] and "floor 5 (model)" in e[0],
           "a layer including the model floor is refused, naming both ends and floors: %s" % e)
    e, _ = check([("model/pass.hpp", "layers/block.hpp"), ("cli/train.hpp", "train/trainer.hpp"), ("train/evaluate.hpp", "io/checkpoint.hpp"),
                  ("io/checkpoint.hpp", "model/model.hpp"), ("data/token_dataset.hpp", "io/token_file.hpp"), ("io/npy.hpp", "xt/views.hpp")]
                 + list(ALLOWLIST))
    expect(e == [], "includes that go down (and io/data as stated) pass: %s" % e)
    for bad in [("io/hf.hpp", "train/train_config.hpp"), ("data/tasks.hpp", "model/config.hpp"), ("model/model.hpp", "io/json.hpp"),
                ("core/params.hpp", "ops/gemm.hpp"), ("decode/decoder.hpp", "train/adamw.hpp"), ("x/y.hpp", "core/rng.hpp")]:
        e, _ = check([bad] + list(ALLOWLIST))
        expect(len(e) == 1 and bad[0] in e[0], "%s -> %s is refused: %s" % (bad + (e,)))
    e, _ = check([])
    expect(len(e) == len(ALLOWLIST), "an allowlist entry that no longer occurs is reported")
    print("check_includes.py self-test: all passed" if ok else "check_includes.py self-test: FAILED")
    return 0 if ok else 1


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    pairs = includes(root)
    errors, hits = check(pairs)
    print("check_includes.py: %d includes in include/fbt; floors, lowest first:" % len(pairs))
    for i, (name, prefixes) in enumerate(FLOORS):
        print("  floor %d %-12s %s" % (i, name, " ".join(prefixes)))
    for name, (hi, lo, others) in BESIDE.items():
        print("  beside   %-12s may include floors 0-%d and %s; included from floor %d up" % (name + "/", hi, "/ ".join(sorted(others)) + "/", lo))
    print("allowlist (known breaks being fixed; remove an entry once its include is gone): %d" % len(ALLOWLIST))
    for f, inc in ALLOWLIST:
        print("  include/fbt/%s -> %s%s" % (f, inc, "" if (f, inc) in hits else "  (no longer occurs)"))
    for e in errors:
        print("ERROR " + e)
    print("check_includes.py: %s" % ("every include goes down" if not errors else "%d includes go the wrong way" % len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
