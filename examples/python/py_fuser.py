#!/usr/bin/env python3
"""A fuser written in Python: check it, register it, train it and decode with it, no C++ build.

    python examples/python/py_fuser.py [--steps 60] [--time 0] [--plugin build/tests/liblowrank.so]

The fuser is low rank, u = e + (s A^T) B^T (A (r, D), B (D, r) = 0 at init, so the model starts as the plain one),
in numpy: `forward` returns u and what its backward needs; `backward` returns the gradients of s, e and the
parameters. fbt.check_fuser checks the backward against central differences in float64; fbt.register_fuser makes
"pylowrank" a value of the config's fuser, for Model, train, Decoder and checkpoints alike (docs/python.md, "A fuser
in Python"). --time N: N steps of the same run with this fuser and with the same fuser in C++ (the plugin's
"lowrank", --plugin), to see what Python costs per step.
"""
import argparse
import shutil
import time

import numpy as np

import fbt


class PyLowRank:
    """u = e + (s A^T) B^T."""
    name = "pylowrank"
    options = {"rank": 8}

    def __init__(self, hidden_size, options):
        self.D, self.r = hidden_size, int(options["rank"])

    def parameters(self):  # {name under model.feedback.: (shape, init)}
        return {"w_a.weight": ((self.r, self.D), ("normal", 1.0 / np.sqrt(self.D))), "w_b.weight": ((self.D, self.r), "zeros")}

    def forward(self, p, s, e):  # s, e: (N, D) views of the step's buffers (valid until this pass's backward)
        z = s @ p["w_a.weight"].T
        return e + z @ p["w_b.weight"].T, z

    def backward(self, p, z, s, e, du):  # -> (ds, de, {name: gradient}): added to the step's gradients
        dz = du @ p["w_b.weight"]
        return dz @ p["w_a.weight"], du, {"w_b.weight": du.T @ z, "w_a.weight": dz.T @ s}


RUN = dict(data="task:running_sum", batch_size=8, seq_len=64, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, intermediate_size=128, max_position_embeddings=128, feedback_start=0.0, warmup_steps=5,
           eval_every=0, seq_eval_windows=0, monitor_passes=0, eval_windows=1, progress=False, verbose=False)


def ms_per_step(fuser, steps, out_dir, **extra):
    stamps = []
    shutil.rmtree(out_dir, ignore_errors=True)
    fbt.train(fuser=fuser, steps=steps, out_dir=out_dir, callback=lambda step, rep: stamps.append(time.perf_counter()), **RUN, **extra)
    d = np.diff(stamps) * 1e3
    return float(np.median(d)), float(np.min(d)), float(np.max(d))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out_dir", default="runs/py_fuser")
    ap.add_argument("--time", type=int, default=0)
    ap.add_argument("--plugin", default="")
    a = ap.parse_args()

    errors = fbt.check_fuser(PyLowRank)
    print("check_fuser: worst normwise relative error %.2g (%s)" % (max(errors.values()), ", ".join(errors)))
    fbt.register_fuser(PyLowRank)
    shutil.rmtree(a.out_dir, ignore_errors=True)
    losses = []
    r = fbt.train(fuser="pylowrank", steps=a.steps, out_dir=a.out_dir, callback=lambda step, rep: losses.append(rep.loss[0]), **RUN)
    print("trained %d steps: loss %.3f -> %.3f; checkpoint %s" % (r.step, losses[0], losses[-1], r.checkpoint))
    model = fbt.Model.load(r.checkpoint)
    out = fbt.Decoder(model).generate("0123401234", mode="soft", greedy=True, max_new_tokens=16)
    print("soft decoding:", fbt.decode(out))
    if a.time > 0:
        py = ms_per_step("pylowrank", a.time, a.out_dir + "_time_py")
        print("pylowrank (Python): %.1f ms/step (median; %.1f-%.1f)" % py)
        if a.plugin:
            fbt.load_plugin(a.plugin)
            cpp = ms_per_step("lowrank", a.time, a.out_dir + "_time_cpp", fuser_options='{"rank": 8}')
            print("lowrank (C++ plugin): %.1f ms/step (median; %.1f-%.1f); Python / C++: %.2f" % (cpp + (py[0] / cpp[0],)))


if __name__ == "__main__":
    main()
