#!/usr/bin/env python3
"""benchmarks/python_blas.py: what numpy's BLAS threads cost fbt's own threads, and what fbt.train's limit saves.

A training run with fbt's threads (``threads=2`` on a 2-core machine) whose per-step callback does a little numpy
linear algebra (a 256 x 256 matrix product, as a notebook's logging or a Python fuser would): numpy's BLAS pool
(OpenBLAS) wakes for it and spins after it, on the cores fbt's step is using. fbt.train limits that pool to one
thread while it runs (``blas_threads_limit=1``, threadpoolctl); ``None`` leaves it as it is. The two settings
alternate over ROUNDS fresh runs; the figure is the median step time (the step alone, report.seconds) of each run,
then the median over runs.

    PYTHONPATH=build/python python3 benchmarks/python_blas.py [--rounds 5] [--steps 60] [--threads 2]
"""
import argparse
import statistics
import sys
import tempfile
import time

import numpy as np

import fbt


def one_run(limit, steps, threads, work_dir):
    a = np.random.default_rng(0).standard_normal((256, 256))
    secs = []

    def cb(step, report):
        np.dot(a, a)  # the numpy work a callback does between steps
        secs.append(report.seconds)

    t0 = time.perf_counter()
    fbt.train(data="task:addition", steps=steps, batch_size=8, seq_len=128, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, intermediate_size=256, feedback_start=0.5, eval_every=0, eval_windows=1, seq_eval_windows=0,
              monitor_passes=0, threads=threads, progress=False, out_dir=work_dir, verbose=False, callback=cb, blas_threads_limit=limit)
    wall = time.perf_counter() - t0
    return statistics.median(secs[steps // 5:]) * 1e3, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    try:
        from threadpoolctl import threadpool_info
        pools = ["%s %s (%d threads)" % (p.get("internal_api"), p.get("version"), p.get("num_threads")) for p in threadpool_info()]
    except ImportError:
        pools = ["threadpoolctl not installed: the limit is a no-op"]
    print("numpy %s; BLAS: %s" % (np.__version__, "; ".join(pools)))
    res = {"limit 1": [], "none": []}
    for r in range(a.rounds):
        for name, limit in (("limit 1", 1), ("none", None)) if r % 2 == 0 else (("none", None), ("limit 1", 1)):
            with tempfile.TemporaryDirectory() as d:
                ms, wall = one_run(limit, a.steps, a.threads, d)
            res[name].append(ms)
            print("round %d %-8s step %.1f ms (median), run %.1f s" % (r, name, ms, wall), flush=True)
    print("\n| BLAS pool during fbt.train | step ms, median of %d runs [min-max] |\n|---|---:|" % a.rounds)
    for name, v in res.items():
        print("| %s | %.1f [%.1f-%.1f] |" % (name, statistics.median(v), min(v), max(v)))
    print("\nratio none / limit 1: %.2f" % (statistics.median(res["none"]) / statistics.median(res["limit 1"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
