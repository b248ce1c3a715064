#!/usr/bin/env python3
"""Linear probes per prefill mode and depth, from Python (the `fbt probe` command as fbt.probe).

    python examples/python/probe.py [--checkpoint CKPT] [--task delayed_memory]

Without --checkpoint a tiny model is trained for a few steps first (its probes are near chance: the point
is the call, not the result; docs/probing.md has the real experiment). fbt.probe reads the representation at
each item's probe position at every depth (0 = the layer-0 input after the fuser, the last = the final
norm's output) under each prefill, fits an L2 logistic regression per (prefill, depth) with grouped
cross-validation and returns the JSON `fbt probe --out` writes, as a dict.
"""
import argparse
import shutil
import sys

import fbt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--task", default="delayed_memory")
    ap.add_argument("--out_dir", default="runs/py_probe")
    a = ap.parse_args()
    ckpt = a.checkpoint
    if not ckpt:
        shutil.rmtree(a.out_dir, ignore_errors=True)
        ckpt = fbt.train(data="task:running_sum", steps=10, batch_size=2, seq_len=32, hidden_size=32,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64,
                         max_position_embeddings=256, feedback_start=0.0, warmup_steps=2, eval_every=0,
                         seq_eval_windows=0, monitor_passes=0, eval_windows=1, progress=False,
                         out_dir=a.out_dir, verbose=False).checkpoint
    r = fbt.probe(checkpoint=ckpt, task=a.task, prefill=["standard", "fused(1)"], null_lines=[0, 8], groups=8, folds=2)
    print(f"\nfrom Python: chance {r['chance']:.3f}; best cell per prefill:")
    best = {}
    for c in r["cells"]:
        if c["mode"] not in best or c["accuracy"] > best[c["mode"]]["accuracy"]:
            best[c["mode"]] = c
    for mode, c in best.items():
        lo, hi = c["ci95"]
        depth = "final" if c["depth"] == r["depths"] - 1 else c["depth"]
        print(f"  {mode:10s} depth {depth}: accuracy {c['accuracy']:.3f} (95% interval [{lo:.3f}, {hi:.3f}])")
    return 0


if __name__ == "__main__":
    sys.exit(main())
