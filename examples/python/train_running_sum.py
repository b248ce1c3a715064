#!/usr/bin/env python3
"""Train a small full-bandwidth model on task:running_sum and plot the loss of every pass.

    python examples/python/train_running_sum.py --out loss.png [--steps 300] [--out_dir runs/py_running_sum]

fbt.train runs the library's trainer exactly as `fbt train` does (each keyword is the command's flag of
that name; here the paper's recipe, preset "paper"). The callback sees every step: the schedule draws K
passes per step (K = 1 before feedback_start, then mostly 1, some 2 and 3), and report.loss holds the loss
of each pass on that step's batch. Pass 1 is the ordinary teacher-forced loss; passes 2 and 3 read the
previous pass's top state. On this running-state task (the next digit is, half the time, the running sum
mod 5) the fed-back passes can beat pass 1 only once the model has learnt to carry the sum; a few hundred
steps of a model this small are not enough for a clear gap (docs/EXPERIMENTS.md trains 1200 steps and
compares against baselines). The script prints, over the steps that ran several passes, the mean of
(pass k - pass 1) on the same batch, and the run's final evaluation beside the task's optimal loss.
The figure goes to --out (PNG via matplotlib; without matplotlib the curves go to a CSV beside it).
"""
import argparse
import json
import os
import shutil
import sys

import fbt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="running_sum_loss.png", help="the figure (PNG)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out_dir", default="runs/py_running_sum", help="the run's directory (replaced)")
    a = ap.parse_args()

    shutil.rmtree(a.out_dir, ignore_errors=True)
    seen = {}  # pass -> ([step], [loss])
    gaps = {}  # pass k >= 2 -> [loss_k - loss_1] of the steps that ran it

    def on_step(step, report):
        for k in range(1, report.K):
            gaps.setdefault(k + 1, []).append(report.loss[k] - report.loss[0])
        for k, loss in enumerate(report.loss):
            xs, ys = seen.setdefault(k + 1, ([], []))
            xs.append(step)
            ys.append(loss)
        # returning False here would stop the run (with a checkpoint of this step)

    r = fbt.train(preset="paper", data="task:running_sum", task_difficulty=5, steps=a.steps, batch_size=8, seq_len=64,
                  hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=128, max_position_embeddings=128, feedback_start=0.3, warmup_steps=20,
                  eval_every=0, seq_eval_windows=1, eval_windows=4, progress=False, out_dir=a.out_dir,
                  callback=on_step, verbose=False)
    print(f"trained {r.step} steps; last step's loss per pass {[round(x, 4) for x in r.loss]}; checkpoint {r.checkpoint}")
    for k in sorted(gaps):
        g = gaps[k]
        print(f"  pass {k} - pass 1 on the same batch: mean {sum(g) / len(g):+.4f} over the {len(g)} steps that ran it")
    with open(os.path.join(a.out_dir, "eval.jsonl")) as f:
        ev = json.loads(f.read().splitlines()[-1])
    print("  final validation loss per pass " + " ".join(f"{x:.4f}" for x in ev["val_loss"]) +
          (f" (the task's optimum {ev['optimal_loss']:.4f})" if "optimal_loss" in ev else ""))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        csv = os.path.splitext(a.out)[0] + ".csv"
        with open(csv, "w") as f:
            f.write("pass,step,loss\n")
            for k in sorted(seen):
                for x, y in zip(*seen[k]):
                    f.write(f"{k},{x},{y!r}\n")
        print(f"matplotlib is not installed (pip install matplotlib): wrote the curves to {csv}")
        return 0
    fig, ax = plt.subplots(figsize=(7, 4))
    for k in sorted(seen):
        ax.plot(*seen[k], ".", ms=2, label=f"pass {k}")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats/token)")
    ax.set_title("task:running_sum, loss per pass")
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
