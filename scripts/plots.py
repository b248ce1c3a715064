#!/usr/bin/env python3
"""plots.py: the figures of an `fbt ablate` grid, as SVG (or PNG with --format png).

    python3 scripts/plots.py OUT_DIR [OUT_DIR ...] [--out FIG_DIR] [--runs SUBSTRING ...] [--format svg|png]

Reads every run directory under each OUT_DIR (train.jsonl, eval.jsonl, result.json, as `fbt ablate`
writes them) and draws, into FIG_DIR (default: the first OUT_DIR/figures):

  val_loss_vs_tokens.svg   validation loss (pass 1 = standard decoding; dashed: the last fed-back pass)
                           against training tokens, one line per run, from eval.jsonl
  contraction.svg          the contraction monitor of each full-bandwidth run's final evaluation:
                           L(k) and delta_k = rms(H_k - H_{k-1}) for k = 1..k_max (spec section 6)
  accuracy_vs_trace.svg    built-in tasks: accuracy against median trace length, one point per run and
                           decoding mode, one panel per problem length (1x, 2x, 4x the training length)

Each configuration (a run's name without its seed) has one colour of its own (tab10, tab20 or a sampled
colormap, by their number) and, in the line plots, its own line style and marker, so that a grid of 14
configurations stays legible. Legends stand outside the axes: one entry per configuration (and, for
the accuracy figure, a second legend of the decoding modes' markers). The accuracy axis is fitted to
the data, shared by the panels.

    python3 scripts/plots.py --probe PROBE.json [PROBE.json ...] [--out FIG_DIR]

draws probe_accuracy.svg from `fbt probe --out` files: held-out accuracy against depth (0 = the layer-0
input, L+1 = the final state), one line per prefill mode with its Wilson 95% band, the chance level
dashed, one panel per file (all items pooled, or --probe_setting N=8: the items of one setting).

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


LINESTYLES = ["-", "--", "-.", ":"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*"]


def configs(runs) -> list:
    keys = []
    for r in runs:
        k = config_of(r["name"])
        if k not in keys:
            keys.append(k)
    return keys


def palette(n: int) -> list:
    """n distinct colours: tab10 up to 10, tab20 up to 20 (its light/dark pairs told apart by the line
    style and marker that styles() adds), else n samples of a continuous colormap."""
    import matplotlib.pyplot as plt
    if n <= 10:
        return [plt.get_cmap("tab10")(i) for i in range(n)]
    if n <= 20:
        return [plt.get_cmap("tab20")(i) for i in range(n)]
    cmap = plt.get_cmap("turbo")
    return [cmap(0.05 + 0.9 * i / (n - 1)) for i in range(n)]


def styles(runs) -> dict:
    """One style per configuration (runs of one configuration, i.e. seeds, share it): a colour that no
    other configuration has, plus a line style and a marker that differ between neighbours, so that 14
    series stay apart even where two colours look alike."""
    keys = configs(runs)
    cols = palette(len(keys))
    return {k: {"color": cols[i], "ls": LINESTYLES[i % len(LINESTYLES)], "marker": MARKERS[i % len(MARKERS)]}
            for i, k in enumerate(keys)}


def colours(runs) -> dict:
    return {k: st["color"] for k, st in styles(runs).items()}


def legend_outside(fig, ax_or_fig, handles, labels, title=None, fontsize=7.5):
    """A legend to the right of the axes, one entry per line, outside the data."""
    return ax_or_fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                            fontsize=fontsize, title=title, title_fontsize=fontsize + 0.5, frameon=False)


def plot_val_loss(plt, runs, path) -> bool:
    from matplotlib.lines import Line2D
    fig, ax = plt.subplots(figsize=(12, 5.5))
    sty = styles(runs)
    col = {k: st["color"] for k, st in sty.items()}
    labelled = {}
    fed_back = set()  # the last fed-back pass of each configuration that has one
    drawn = False
    for r in runs:
        ev = [e for e in r["evals"] if e.get("val_loss")]
        if not ev:
            continue
        key = config_of(r["name"])
        x = [e["tokens"] / 1e6 for e in ev]
        (line,) = ax.plot(x, [e["val_loss"][0] for e in ev], "-", marker=sty[key]["marker"], ms=3.5, color=col[key],
                          lw=1.2)
        labelled.setdefault(key, line)
        # the last fed-back pass, from the first evaluation after feedback training began (before it, that
        # pass was never trained and its loss says nothing)
        fb = [e for e in ev if len(e["val_loss"]) > 1 and e.get("compute_tokens", 0) > e["tokens"]]
        if fb:
            k = len(fb[-1]["val_loss"])
            fed_back.add(k)
            ax.plot([e["tokens"] / 1e6 for e in fb], [e["val_loss"][-1] for e in fb], "--", color=col[key], lw=1)
        drawn = True
    if not drawn:
        plt.close(fig)
        return False
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("validation loss (nats/byte)")
    ax.set_title("validation loss vs tokens (solid: pass 1 = standard; dashed: last fed-back pass; one colour per configuration)",
                 fontsize=9)
    ax.grid(alpha=0.3)
    # one entry per configuration, and the two line styles once (not once per configuration)
    h, lab = list(labelled.values()), list(labelled.keys())
    if fed_back:
        passes = "/".join(str(k) for k in sorted(fed_back))
        h += [Line2D([], [], color="#555555", lw=1.2), Line2D([], [], color="#555555", lw=1, ls="--")]
        lab += ["solid: pass 1 (standard)", f"dashed: pass {passes}, the last fed-back pass, after feedback starts"]
    legend_outside(fig, ax, h, lab, title="configuration (seeds share a colour)", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_contraction(plt, runs, path) -> bool:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(14, 5.2))
    sty = styles(runs)
    labelled = {}
    drawn = False
    for r in runs:
        c = ((r["result"] or {}).get("eval") or {}).get("contraction")
        if not c:
            continue
        key = config_of(r["name"])
        st = sty[key]
        k = list(range(1, len(c["loss"]) + 1))
        every = max(1, len(k) // 10)  # markers on about 10 points of a 30-pass curve
        (line,) = a1.plot(k, c["loss"], ls=st["ls"], marker=st["marker"], markevery=every, ms=4, lw=1.4,
                          color=st["color"])
        labelled.setdefault(key, line)
        # delta_1 is 0 by definition (no previous pass): plot from k = 2
        d = [(kk, v) for kk, v in zip(k, c["delta"]) if kk >= 2 and v > 0]
        if d:
            a2.semilogy([p[0] for p in d], [p[1] for p in d], ls=st["ls"], marker=st["marker"], markevery=every,
                        ms=4, lw=1.4, color=st["color"])
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
    legend_outside(fig, a2, list(labelled.values()), list(labelled.keys()),
                   title="configuration (seeds share a style)")
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_accuracy(plt, runs, path) -> bool:
    """One panel per problem length (result.json "tasks" keys "mode@mx"): accuracy against median trace
    length, a colour per configuration, a marker per decoding mode. Two legends beside the panels
    (configurations by colour, modes by marker) instead of one entry per pair; the y axis is fitted
    to the data (shared by the panels), and the modes are nudged sideways so that equal points do not
    hide each other."""
    from matplotlib.lines import Line2D
    markers = {"standard": "o", "soft": "s", "fused(1)": "^", "fused(2)": "D"}
    pts = {}  # length multiple -> [(configuration, mode, trace, accuracy)]
    for r in runs:
        for key, t in ((r["result"] or {}).get("tasks") or {}).items():
            mode = t.get("mode", key.split("@")[0])
            m = int(t.get("length_mult", 1))
            pts.setdefault(m, []).append((config_of(r["name"]), mode, t["median_trace"], t["accuracy"]))
    if not pts:
        return False
    col = colours(runs)
    modes = []
    for m in sorted(pts):
        for _, mode, _, _ in pts[m]:
            if mode not in modes:
                modes.append(mode)
    modes.sort(key=lambda md: (list(markers).index(md) if md in markers else len(markers), md))
    mk = {md: markers.get(md, MARKERS[(i + 4) % len(MARKERS)]) for i, md in enumerate(modes)}
    used = [k for k in col if any(c == k for m in pts for c, _, _, _ in pts[m])]
    accs = [a for m in pts for _, _, _, a in pts[m]]
    top = max(accs)
    hi = min(1.0, top * 1.12) if top > 0 else 0.05
    hi = max(hi, 0.05)
    pad = 0.04 * hi
    lengths = sorted(pts)
    fig, axes = plt.subplots(1, len(lengths), figsize=(4.6 * len(lengths) + 3.2, 4.6), squeeze=False, sharey=True)
    for ax, m in zip(axes[0], lengths):
        traces = [tr for _, _, tr, _ in pts[m]]
        span = (max(traces) - min(traces)) or max(1.0, abs(max(traces)))
        nudge = 0.012 * span
        for name, mode, trace, acc in pts[m]:
            i = modes.index(mode)
            ax.scatter(trace + (i - (len(modes) - 1) / 2) * nudge, acc, color=col[name], marker=mk[mode], s=34,
                       alpha=0.85, edgecolors="black", linewidths=0.4)
        ax.set_title(f"problems {m}x the training length")
        ax.set_xlabel("median trace length (generated bytes)")
        ax.set_ylim(-pad, hi + pad)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy (greedy)")
    last = axes[0][-1]
    h_cfg = [Line2D([], [], ls="", marker="o", ms=6, color=col[k], markeredgecolor="black", markeredgewidth=0.4)
             for k in used]
    h_mode = [Line2D([], [], ls="", marker=mk[md], ms=6, color="#888888", markeredgecolor="black",
                     markeredgewidth=0.4) for md in modes]
    lg = last.legend(h_cfg, used, loc="upper left", bbox_to_anchor=(1.03, 1.0), borderaxespad=0.0, fontsize=7.5,
                     title="configuration (colour)", title_fontsize=8, frameon=False)
    last.add_artist(lg)
    last.legend(h_mode, modes, loc="lower left", bbox_to_anchor=(1.03, 0.0), borderaxespad=0.0, fontsize=7.5,
                title="decoding mode (marker)", title_fontsize=8, frameon=False)
    st = fig.suptitle("accuracy vs median trace length, per configuration and decoding mode")
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", bbox_extra_artists=[lg, st])
    plt.close(fig)
    return True


def plot_probe(plt, files: list, path, setting: str = "") -> bool:
    """Probe accuracy against depth, one line per prefill mode, one panel per `fbt probe --out` file."""
    data = []
    for f in files:
        try:
            with open(f) as fh:
                j = json.load(fh)
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"plots.py: {f}: not a probe result ({e})")
        if not isinstance(j, dict) or "cells" not in j or "depths" not in j:
            raise SystemExit(f"plots.py: {f}: not a probe result (no cells/depths)")
        data.append((f, j))
    if not data:
        return False
    fig, axes = plt.subplots(1, len(data), figsize=(4.2 * len(data) + 1.5, 3.4), squeeze=False)
    markers = ["o", "s", "^", "D", "v", "P"]
    for ax, (f, j) in zip(axes[0], data):
        modes = []
        for c in j["cells"]:
            if c.get("setting", "") == setting and c["mode"] not in modes:
                modes.append(c["mode"])
        for i, m in enumerate(modes):
            cells = sorted((c for c in j["cells"] if c["mode"] == m and c.get("setting", "") == setting), key=lambda c: c["depth"])
            x = [c["depth"] for c in cells]
            ax.plot(x, [c["accuracy"] for c in cells], marker=markers[i % len(markers)], label=m, lw=1.4, ms=4)
            ax.fill_between(x, [c["ci95"][0] for c in cells], [c["ci95"][1] for c in cells], alpha=0.15)
        ax.axhline(j.get("chance", 0.5), color="grey", ls="--", lw=1, label="chance")
        d = j["depths"]
        ax.set_xticks(range(d))
        ax.set_xticklabels([str(k) for k in range(d - 1)] + ["final"], fontsize=7)
        ax.set_xlabel("depth (0 = layer-0 input)")
        ax.set_ylabel("held-out accuracy")
        ax.set_ylim(0, 1.02)
        ax.set_title(os.path.basename(str(j.get("items", f))) + (f" ({setting})" if setting else ""), fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7.5, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dirs", nargs="*", help="out_dir(s) of fbt ablate grids")
    ap.add_argument("--probe", nargs="*", default=[], help="fbt probe --out JSON files: probe_accuracy figure")
    ap.add_argument("--probe_setting", default="", help="the items' setting to draw (e.g. N=8; default: all items pooled)")
    ap.add_argument("--out", help="directory for the figures (default: FIRST_OUT_DIR/figures)")
    ap.add_argument("--runs", nargs="*", default=[], help="keep runs whose name contains one of these")
    ap.add_argument("--format", default="svg", choices=["svg", "png"])
    ap.add_argument("--prefix", default="", help="prefix of the figure file names")
    a = ap.parse_args(argv)
    if not a.out_dirs and not a.probe:
        ap.error("give out_dir(s) of fbt ablate grids, or --probe FILE.json")
    if not a.out_dirs and not a.out:
        ap.error("--probe without an out_dir needs --out FIG_DIR")
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
    runs = load_runs(a.out_dirs, a.runs) if a.out_dirs else []
    out = a.out or os.path.join(a.out_dirs[0], "figures")
    os.makedirs(out, exist_ok=True)
    figures = [("val_loss_vs_tokens", plot_val_loss), ("contraction", plot_contraction), ("accuracy_vs_trace", plot_accuracy)] if a.out_dirs else []
    if a.probe:
        figures.append(("probe_accuracy", lambda plt_, _runs, path: plot_probe(plt_, a.probe, path, a.probe_setting)))
    for stem, fn in figures:
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
