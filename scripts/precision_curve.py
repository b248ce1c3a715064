#!/usr/bin/env python3
"""Compare the loss curves of an fp32 and a bf16 run of `fbt train` (same config and seed: same batches).

    python3 scripts/precision_curve.py RUN_FP32 RUN_BF16 [--smooth 50] [--out curve.svg] [--tol 0.01]

Reads each run's train.jsonl (the per-step training loss of pass 1, which every step has, and of the
fed-back passes where the step ran them) and eval.jsonl (validation losses per pass). Prints:
  * per-step pass-1 loss: the largest and the median relative gap |bf16 - fp32| / fp32;
  * the same after a moving average over --smooth steps (the curve a plot shows);
  * every evaluation: the validation loss of each pass in both runs and the gap;
and exits 1 when the smoothed curve's largest relative gap exceeds --tol (default 1%). With matplotlib
it also draws both smoothed curves and the gap (--out, svg or png). Plain Python 3 otherwise.
"""
import argparse
import json
import os
import statistics
import sys


def load_jsonl(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def smooth(xs, w):
    out, acc = [], 0.0
    for i, x in enumerate(xs):
        acc += x
        if i >= w:
            acc -= xs[i - w]
        out.append(acc / min(i + 1, w))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("fp32")
    ap.add_argument("bf16")
    ap.add_argument("--smooth", type=int, default=50)
    ap.add_argument("--tol", type=float, default=0.01, help="largest allowed relative gap of the smoothed pass-1 loss")
    ap.add_argument("--out", help="figure path (.svg or .png); needs matplotlib")
    a = ap.parse_args(argv)
    tf = load_jsonl(os.path.join(a.fp32, "train.jsonl"))
    tb = load_jsonl(os.path.join(a.bf16, "train.jsonl"))
    n = min(len(tf), len(tb))
    if n == 0:
        print("precision_curve: no steps in train.jsonl", file=sys.stderr)
        return 2
    for i in range(n):
        if tf[i]["step"] != tb[i]["step"] or tf[i]["K"] != tb[i]["K"]:
            print(f"precision_curve: step {i}: the runs differ in step or K (not the same schedule)", file=sys.stderr)
            return 2
    lf = [r["loss"][0] for r in tf[:n]]
    lb = [r["loss"][0] for r in tb[:n]]
    gaps = [abs(b - f) / f for f, b in zip(lf, lb)]
    sf, sb = smooth(lf, a.smooth), smooth(lb, a.smooth)
    sgaps = [abs(b - f) / f for f, b in zip(sf, sb)]
    worst = max(range(n), key=lambda i: sgaps[i])
    print(f"{n} steps (same schedule in both runs: {sum(r['K'] > 1 for r in tf[:n])} fed-back steps)")
    print(f"pass-1 training loss, per step: largest gap {100 * max(gaps):.2f}%, median {100 * statistics.median(gaps):.3f}%")
    print(f"smoothed over {a.smooth} steps: largest gap {100 * sgaps[worst]:.3f}% (step {tf[worst]['step']}: fp32 {sf[worst]:.4f}, "
          f"bf16 {sb[worst]:.4f}); final fp32 {sf[-1]:.4f}, bf16 {sb[-1]:.4f}")
    ef = load_jsonl(os.path.join(a.fp32, "eval.jsonl")) if os.path.exists(os.path.join(a.fp32, "eval.jsonl")) else []
    eb = load_jsonl(os.path.join(a.bf16, "eval.jsonl")) if os.path.exists(os.path.join(a.bf16, "eval.jsonl")) else []
    if ef and eb:
        print("\n| step | pass | fp32 val loss | bf16 val loss | gap |")
        print("|---:|---:|---:|---:|---:|")
        for x, y in zip(ef, eb):
            for k, (vf, vb) in enumerate(zip(x.get("val_loss", []), y.get("val_loss", []))):
                print(f"| {x['step']} | {k + 1} | {vf:.4f} | {vb:.4f} | {vb - vf:+.4f} |")
    if a.out:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("precision_curve: matplotlib not found; no figure", file=sys.stderr)
        else:
            fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
            steps = [r["step"] for r in tf[:n]]
            ax1.plot(steps, sf, label="fp32", lw=1.5)
            ax1.plot(steps, sb, label="bf16 products (fp32 master weights)", lw=1.2, ls="--")
            ax1.set_ylabel(f"pass-1 training loss ({a.smooth}-step mean)")
            ax1.legend()
            ax1.grid(alpha=0.3)
            ax2.plot(steps, [100 * (b - f) / f for f, b in zip(sf, sb)], color="k", lw=1)
            ax2.axhline(0, color="grey", lw=0.5)
            ax2.set_ylabel("bf16 - fp32 (%)")
            ax2.set_xlabel("step")
            ax2.grid(alpha=0.3)
            fig.tight_layout()
            fig.savefig(a.out)
            print(f"wrote {a.out}")
    if sgaps[worst] > a.tol:
        print(f"precision_curve: the smoothed gap {100 * sgaps[worst]:.3f}% exceeds the tolerance {100 * a.tol:.2f}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
