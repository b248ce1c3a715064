#!/usr/bin/env python3
"""plots.py: the figures of an `fbt ablate` grid (issue 6), as SVG (or PNG with --format png).

    python3 scripts/plots.py OUT_DIR [OUT_DIR ...] [--out FIG_DIR] [--runs SUBSTRING ...] [--format svg|png]

Reads every run directory under each OUT_DIR (train.jsonl, eval.jsonl, result.json, as `fbt ablate`
writes them) and draws, into FIG_DIR (default: the first OUT_DIR/figures):

  val_loss_vs_tokens.svg   validation loss (pass 1 = standard decoding; dashed: the last fed-back pass)
                           against training tokens, one line per run, from eval.jsonl
  contraction.svg          the contraction monitor of each full-bandwidth run's final evaluation:
                           L(k) and delta_k = rms(H_k - H_{k-1}) for k = 1..k_max (spec section 6)
  accuracy_vs_trace.svg    built-in tasks: accuracy against median trace length, one point per run and
                           decoding mode, one panel per problem length (1x, 2x, 4x the training length)

A figure whose data no run has is skipped with a note. --runs keeps the runs whose name contains any of
the given substrings. Needs matplotlib (Debian: python3-matplotlib; pip: matplotlib); exits 77 with a
message when it is missing (ctest reads 77 as "skipped").
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def load_jsonl(path: str) -> list:
    """Rows of a JSONL file; a step logged twice (a resumed run repeats the steps after its last
    checkpoint) keeps its last row."""
    rows = {}
    if not os.path.exists(path):
        return []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"plots.py: {path}:{n}: not valid JSON ({e})")
            rows[r.get("step", n)] = r
    return [rows[k] for k in sorted(rows)]


def load_runs(out_dirs: list, only: list) -> list:
    runs = []
    for d in out_dirs:
        if not os.path.isdir(d):
            raise SystemExit(f"plots.py: {d}: not a directory (give the out_dir of an fbt ablate grid)")
        for name in sorted(os.listdir(d)):
            rd = os.path.join(d, name)
            if not os.path.isdir(rd) or not os.path.exists(os.path.join(rd, "eval.jsonl")):
                continue
            if only and not any(s in name for s in only):
                continue
            res = None
            rp = os.path.join(rd, "result.json")
            if os.path.exists(rp):
                with open(rp) as f:
                    try:
                        res = json.load(f)
                    except json.JSONDecodeError as e:
                        raise SystemExit(f"plots.py: {rp}: not valid JSON ({e})")
            runs.append({"name": name, "dir": rd, "evals": load_jsonl(os.path.join(rd, "eval.jsonl")), "result": res})
    if not runs:
        raise SystemExit(f"plots.py: no runs (directories with eval.jsonl) under {', '.join(out_dirs)}")
    return runs


def config_of(name: str) -> str:
    """A run's name without its seed: runs of one configuration share a colour."""
    return " ".join(p for p in name.split("+") if not p.startswith("seed="))


def colours(runs) -> dict:
    keys = []
    for r in runs:
        k = config_of(r["name"])
        if k not in keys:
            keys.append(k)
    return {k: f"C{i % 10}" for i, k in enumerate(keys)}


def plot_val_loss(plt, runs, path) -> bool:
    fig, ax = plt.subplots(figsize=(9, 5.5))
    col = colours(runs)
    labelled = set()
    drawn = False
    for r in runs:
        ev = [e for e in r["evals"] if e.get("val_loss")]
        if not ev:
            continue
        key = config_of(r["name"])
        x = [e["tokens"] / 1e6 for e in ev]
        ax.plot(x, [e["val_loss"][0] for e in ev], "-o", ms=3, color=col[key], lw=1.2, label=None if key in labelled else key)
        # the last fed-back pass, from the first evaluation after feedback training began (before it, that
        # pass was never trained and its loss says nothing)
        fb = [e for e in ev if len(e["val_loss"]) > 1 and e.get("compute_tokens", 0) > e["tokens"]]
        if fb:
            k = len(fb[-1]["val_loss"])
            ax.plot([e["tokens"] / 1e6 for e in fb], [e["val_loss"][-1] for e in fb], "--", color=col[key], lw=1,
                    label=None if key in labelled else f"  pass {k} (fused({k - 1})), after feedback starts")
        labelled.add(key)
        drawn = True
    if not drawn:
        plt.close(fig)
        return False
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("validation loss (nats/byte)")
    ax.set_title("validation loss vs tokens (solid: pass 1 = standard; dashed: last fed-back pass; one colour per configuration)",
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=1)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_contraction(plt, runs, path) -> bool:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    col = colours(runs)
    labelled = set()
    drawn = False
    for r in runs:
        c = ((r["result"] or {}).get("eval") or {}).get("contraction")
        if not c:
            continue
        key = config_of(r["name"])
        k = list(range(1, len(c["loss"]) + 1))
        a1.plot(k, c["loss"], "-o", ms=2.5, color=col[key], label=None if key in labelled else key)
        labelled.add(key)
        # delta_1 is 0 by definition (no previous pass): plot from k = 2
        d = [(kk, v) for kk, v in zip(k, c["delta"]) if kk >= 2 and v > 0]
        if d:
            a2.semilogy([p[0] for p in d], [p[1] for p in d], "-o", ms=2.5, color=col[key])
        drawn = True
    if not drawn:
        plt.close(fig)
        return False
    a1.set_xlabel("pass k (k = 1: plain)")
    a1.set_ylabel("loss L(k)")
    a1.set_title("contraction monitor: loss per unrolled pass")
    a2.set_xlabel("pass k")
    a2.set_ylabel("delta_k = rms(H_k - H_{k-1})")
    a2.set_title("change of the top state between passes")
    for a in (a1, a2):
        a.grid(alpha=0.3)
    a1.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_accuracy(plt, runs, path) -> bool:
    """One panel per problem length (result.json "tasks" keys "mode@mx"): accuracy against median trace
    length, a colour per run, a marker per decoding mode."""
    markers = {"standard": "o", "soft": "s", "fused(1)": "^", "fused(2)": "D"}
    pts = {}  # length multiple -> [(colour, configuration, mode, trace, accuracy)]
    col = colours(runs)
    for r in runs:
        for key, t in ((r["result"] or {}).get("tasks") or {}).items():
            mode = t.get("mode", key.split("@")[0])
            m = int(t.get("length_mult", 1))
            pts.setdefault(m, []).append((col[config_of(r["name"])], config_of(r["name"]), mode, t["median_trace"], t["accuracy"]))
    if not pts:
        return False
    lengths = sorted(pts)
    fig, axes = plt.subplots(1, len(lengths), figsize=(5.5 * len(lengths), 4.8), squeeze=False)
    for ax, m in zip(axes[0], lengths):
        seen = set()
        for c, name, mode, trace, acc in pts[m]:
            lab = f"{name} {mode}"
            ax.scatter(trace, acc, color=c, marker=markers.get(mode, "x"), s=36, alpha=0.8,
                       label=lab if m == lengths[0] and lab not in seen else None)
            seen.add(lab)
        ax.set_title(f"problems {m}x the training length")
        ax.set_xlabel("median trace length (generated bytes)")
        ax.set_ylabel("accuracy (greedy)")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=6, ncol=1)
    fig.suptitle("accuracy vs trace length per decoding mode (o standard, s soft, ^ fused(1), D fused(2))")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dirs", nargs="+", help="out_dir(s) of fbt ablate grids")
    ap.add_argument("--out", help="directory for the figures (default: FIRST_OUT_DIR/figures)")
    ap.add_argument("--runs", nargs="*", default=[], help="keep runs whose name contains one of these")
    ap.add_argument("--format", default="svg", choices=["svg", "png"])
    ap.add_argument("--prefix", default="", help="prefix of the figure file names")
    a = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots.py: matplotlib is missing (Debian: apt-get install python3-matplotlib; pip install matplotlib); skipped",
              file=sys.stderr)
        return 77
    if a.format == "svg":
        matplotlib.rcParams["svg.hashsalt"] = "fbt"  # stable ids: the same data gives the same file
        matplotlib.rcParams["svg.fonttype"] = "none"
    runs = load_runs(a.out_dirs, a.runs)
    out = a.out or os.path.join(a.out_dirs[0], "figures")
    os.makedirs(out, exist_ok=True)
    for stem, fn in (("val_loss_vs_tokens", plot_val_loss), ("contraction", plot_contraction), ("accuracy_vs_trace", plot_accuracy)):
        path = os.path.join(out, f"{a.prefix}{stem}.{a.format}")
        tmp = path + ".tmp." + a.format
        if fn(plt, runs, tmp):
            os.replace(tmp, path)
            print(f"wrote {path}")
        else:
            print(f"skipped {stem}: no run has its data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
