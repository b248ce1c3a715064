#!/usr/bin/env python3
"""scale_summary.py: the scale ladder's table (docs/EXPERIMENTS.md, "Scale"; issue 48) from the rungs' results.

    python3 scripts/scale_summary.py OUT_DIR [--json FILE] [--plots FIG_DIR [--format svg|png]]
    python3 scripts/scale_summary.py --self-test

OUT_DIR is scripts/experiments.sh scale's: OUT_DIR/<rung>/ (an `fbt ablate` out_dir, with multiplier.json from
scripts/multiplier.py) and OUT_DIR/grids/<rung>.json. Prints markdown, one row per rung and decoding mode: the
baseline's parameters and token budget N, the full-bandwidth model's validation loss (mean over seeds, and its
difference from the baseline at N with the 95% interval paired by seed), the token multiplier with its interval
(scripts/multiplier.py's per-seed fits), and then the compute each rung took (the runs' training seconds, summed
from their result.json) and in all, and the soft-decoding overhead per rung where OUT_DIR/<rung>/soft_overhead.jsonl
holds bench_e2e's soft_overhead lines (one per process: the median over processes and their range). --json also
writes the rows, the compute and the overheads. --plots FIG_DIR draws scale_multiplier.svg (the token multiplier
against parameters per decoding mode, with the 95% intervals) and scale_loss_vs_tokens.svg (per rung: the
baseline's validation loss at N, 1.5 N, 2 N and the full-bandwidth model's at N per mode, mean and 95% interval
over seeds); needs matplotlib, skipped with a note without it.
"""
import glob
import json
import math
import os
import statistics
import sys
import tempfile

from tinterval import mean_ci  # scripts/tinterval.py


def load(path):
    with open(path) as fh:
        return json.load(fh)


def fmt_stats(st, f="{:.3f}", unit=""):
    if not st:
        return "-"
    if st.get("ci95") is None:
        return f.format(st["mean"]) + unit + " (1 seed)"
    lo, hi = st["ci95"]
    return f.format(st["mean"]) + unit + " [" + f.format(lo) + unit + ", " + f.format(hi) + unit + "]"


def soft_overhead(rung_dir):
    """bench_e2e soft_overhead lines of one rung: {processes, standard_ms, soft_ms, overhead median, min, max}."""
    path = os.path.join(rung_dir, "soft_overhead.jsonl")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        lines = [json.loads(l) for l in fh if l.strip()]
    if not lines:
        return None
    ov = [l["overhead"] for l in lines]
    return {"processes": len(lines), "measure": lines[0].get("measure"), "standard_ms": statistics.median(l["standard_median_ms"] for l in lines),
            "soft_ms": statistics.median(l["soft_median_ms"] for l in lines), "overhead": statistics.median(ov), "min": min(ov), "max": max(ov)}


def curves(out_dir):
    """Per rung, from its summary.csv (one row per run): the baseline's parallel loss per budget and the
    full-bandwidth model's per mode, each a list over seeds: {rung: {"baseline": {tokens: [..]}, "fbt": {mode: (tokens, [..])}}}."""
    import csv
    out = {}
    for rung_dir in sorted(d for d in glob.glob(os.path.join(out_dir, "r*")) if os.path.isdir(d)):
        path = os.path.join(rung_dir, "summary.csv")
        if not os.path.exists(path):
            continue
        c = {"baseline": {}, "fbt": {}}
        with open(path) as fh:
            for r in csv.DictReader(fh):
                if r.get("status") != "done":
                    continue
                t = int(float(r["tokens"]))
                if r["fuser"] == "none":
                    c["baseline"].setdefault(t, []).append(float(r["val_loss_pass1"]))
                else:
                    for mode, col in (("standard", "val_loss_pass1"), ("fused(1)", "val_loss_pass2"), ("fused(2)", "val_loss_pass3")):
                        if r.get(col):
                            c["fbt"].setdefault(mode, (t, []))[1].append(float(r[col]))
        out[os.path.basename(rung_dir)] = c
    return out


def plot(rows, out_dir, fig_dir, fmt="svg"):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("scale_summary.py: no matplotlib (python3-matplotlib): figures skipped", file=sys.stderr)
        return []
    if fmt == "svg":  # as scripts/plots.py: stable ids and no date, so the same data gives the same file
        matplotlib.rcParams["svg.hashsalt"] = "fbt"
        matplotlib.rcParams["svg.fonttype"] = "none"
    meta = {"Date": None} if fmt == "svg" else {}
    os.makedirs(fig_dir, exist_ok=True)
    written = []
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, mode in enumerate(m for m in ("standard", "fused(1)", "fused(2)", "sequential (soft)") if any(r["mode"] == m for r in rows)):
        pts = [(params_of(r["comment"]), r["multiplier"]) for r in rows if r["mode"] == mode and r["multiplier"] and params_of(r["comment"])]
        if not pts:
            continue
        xs = [p * (1 + 0.04 * (i - 1.5)) for p, _ in pts]  # nudged apart so the intervals do not overlap
        ys = [m["mean"] for _, m in pts]
        lo = [m["mean"] - m["ci95"][0] if m.get("ci95") else 0 for _, m in pts]
        hi = [m["ci95"][1] - m["mean"] if m.get("ci95") else 0 for _, m in pts]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=mode)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axhline(1.5, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ps = sorted({params_of(r["comment"]) for r in rows if params_of(r["comment"])})
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ps))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter(["%.2fM" % (p / 1e6) for p in ps]))
    lo_y, hi_y = ax.get_ylim()
    ax.set_ylim(min(lo_y, 0.9), max(hi_y, 1.6))
    ax.text(0.01, 1.5, "paper: 1.5x", color="grey", fontsize=8, va="bottom", transform=ax.get_yaxis_transform())
    ax.set_xlabel("parameters (baseline)")
    ax.set_ylabel("token multiplier (mean, 95% CI over seeds)")
    ax.set_title("Tokens the baseline needs to match the full-bandwidth model", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(os.path.join(fig_dir, "scale_multiplier." + fmt), metadata=meta)
    written.append(os.path.join(fig_dir, "scale_multiplier." + fmt))
    plt.close(fig)
    cs = curves(out_dir)
    if cs:
        fig, axes = plt.subplots(1, len(cs), figsize=(3.2 * len(cs), 3.4), squeeze=False)
        for ax, (rung, c) in zip(axes[0], sorted(cs.items())):
            ts = sorted(c["baseline"])
            n = ts[0] if ts else min(t for t, _ in c["fbt"].values())  # N: the smallest budget
            if ts:
                ms = [mean_ci(c["baseline"][t]) for t in ts]
                ax.errorbar([t / n for t in ts], [m for m, _ in ms], yerr=[h or 0 for _, h in ms], marker="o", color="black", capsize=3,
                            label="baseline")
            for k, (mode, marker) in enumerate((("standard", "s"), ("fused(1)", "^"), ("fused(2)", "v"))):
                if mode in c["fbt"]:
                    t, xs = c["fbt"][mode]
                    m, h = mean_ci(xs)
                    ax.errorbar([t / n + 0.04 * (k + 1)], [m], yerr=[h or 0], marker=marker, ls="none", capsize=3, label="FBT " + mode)
            gp = os.path.join(out_dir, "grids", rung + ".json")
            p = params_of(load(gp).get("comment", "")) if os.path.exists(gp) else None
            ax.set_title("%s: %s, N = %.2fM tokens" % (rung, "%.2fM params" % (p / 1e6) if p else "", n / 1e6), fontsize=9)
            ax.set_xticks([1, 1.5, 2])
            ax.set_xlabel("training tokens / N")
        axes[0][0].set_ylabel("validation loss (nats/byte)")
        axes[0][-1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(fig_dir, "scale_loss_vs_tokens." + fmt), metadata=meta)
        written.append(os.path.join(fig_dir, "scale_loss_vs_tokens." + fmt))
        plt.close(fig)
    return written


def summarise(out_dir):
    rows, compute = [], {}
    for rung_dir in sorted(d for d in glob.glob(os.path.join(out_dir, "r*")) if os.path.isdir(d)):
        rung = os.path.basename(rung_dir)
        grid_path = os.path.join(out_dir, "grids", rung + ".json")
        grid = load(grid_path) if os.path.exists(grid_path) else {}
        results = [load(p) for p in glob.glob(os.path.join(rung_dir, "*", "result.json"))]
        done = [r for r in results if r.get("status") == "done"]
        secs = sum(r.get("cpu_seconds", r.get("seconds", 0.0)) for r in done)  # CPU time where recorded, else wall time
        planned = len(grid.get("runs", [])) * len(grid.get("seeds", [1]))  # the grid's runs, finished or not
        compute[rung] = {"runs": max(planned, len(results)), "done": len(done), "seconds": secs, "wall_seconds": sum(r.get("seconds", 0.0) for r in done),
                         "cpu_recorded": sum("cpu_seconds" in r for r in done),
                         "soft_overhead": soft_overhead(rung_dir)}
        mj = os.path.join(rung_dir, "multiplier.json")
        if not os.path.exists(mj):
            continue
        m = load(mj)
        base = grid.get("base", {})
        for row in m.get("fbt", []):
            rows.append({"rung": rung, "hidden_size": base.get("hidden_size"), "layers": base.get("num_hidden_layers"),
                         "mode": row["mode"], "tokens": row["tokens"], "seeds": row["seeds"],
                         "loss_mean": sum(row["loss"]) / len(row["loss"]),
                         "loss_difference": row.get("loss_difference_stats"), "multiplier": row.get("multiplier_stats"),
                         "multiplier_note": row.get("multiplier_note", ""), "comment": grid.get("comment", "")})
    return rows, compute


def params_of(comment):
    """The parameter count scale_grid.py writes into a grid's comment ("..., 123648 parameters (baseline)")."""
    words = comment.split()
    for i, w in enumerate(words[1:], 1):
        if w.startswith("parameters") and words[i - 1].isdigit():
            return int(words[i - 1])
    return None


def main(argv):
    if len(argv) >= 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out_dir, json_out, fig_dir, fmt = argv[1], None, None, "svg"
    i = 2
    while i < len(argv):
        if argv[i] == "--json" and i + 1 < len(argv):
            json_out = argv[i + 1]
        elif argv[i] == "--plots" and i + 1 < len(argv):
            fig_dir = argv[i + 1]
        elif argv[i] == "--format" and i + 1 < len(argv) and argv[i + 1] in ("svg", "png"):
            fmt = argv[i + 1]
        else:
            print("scale_summary.py: unknown argument %r (expected --json FILE, --plots DIR, --format svg|png)" % argv[i], file=sys.stderr)
            return 2
        i += 2
    rows, compute = summarise(out_dir)
    print("| rung | parameters | N tokens | mode | seeds | FBT loss | FBT - baseline at N [95% CI] | token multiplier [95% CI] |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        p = params_of(r["comment"])
        mult = fmt_stats(r["multiplier"], "{:.2f}", "x") if r["multiplier"] else ("- (" + r["multiplier_note"] + ")" if r["multiplier_note"] else "-")
        print("| %s | %s | %.3gM | %s | %d | %.4f | %s | %s |" % (r["rung"], "%.3gM" % (p / 1e6) if p else "?", r["tokens"] / 1e6, r["mode"],
                                                            len(r["seeds"]), r["loss_mean"], fmt_stats(r["loss_difference"], "{:+.4f}"), mult))
    total = sum(c["seconds"] for c in compute.values())
    print("\nCompute (the finished runs' CPU seconds from result.json's cpu_seconds, their thread's CPU time; wall seconds")
    print("where a run did not record it, which a shared machine inflates):\n")
    print("| rung | runs done | CPU-seconds | CPU-hours | runs with CPU time | wall seconds |")
    print("|---|---|---|---|---|---|")
    for rung, c in compute.items():
        print("| %s | %d of %d | %.0f | %.2f | %d | %.0f |" % (rung, c["done"], c["runs"], c["seconds"], c["seconds"] / 3600, c["cpu_recorded"], c["wall_seconds"]))
    print("| all | %d | %.0f | %.2f | %d | %.0f |" % (sum(c["done"] for c in compute.values()), total, total / 3600,
                                              sum(c["cpu_recorded"] for c in compute.values()), sum(c["wall_seconds"] for c in compute.values())))
    ovs = [(rung, c["soft_overhead"]) for rung, c in compute.items() if c.get("soft_overhead")]
    if ovs:
        print("\nSoft-decoding overhead (bench_e2e --measure %s with each rung's shape, one thread, one line per process):\n" % ovs[0][1]["measure"])
        print("| rung | processes | standard ms/token | soft ms/token | overhead median (range) |")
        print("|---|---|---|---|---|")
        for rung, o in ovs:
            print("| %s | %d | %.4f | %.4f | %+.2f%% (%+.2f%% to %+.2f%%) |" % (rung, o["processes"], o["standard_ms"], o["soft_ms"], 100 * o["overhead"],
                                                                       100 * o["min"], 100 * o["max"]))
    if fig_dir:
        for f in plot(rows, out_dir, fig_dir, fmt):
            print("\nwrote " + f)
    if json_out:
        with open(json_out, "w") as fh:
            json.dump({"rows": rows, "compute": compute, "total_seconds": total}, fh, indent=1)
    return 0


def self_test():
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "grids"))
        with open(os.path.join(t, "grids", "r0.json"), "w") as fh:
            json.dump({"base": {"hidden_size": 64, "num_hidden_layers": 2}, "comment": "rung r0: D 64, 123648 parameters (baseline); N"}, fh)
        for name, secs in (("fuser=glu+tokens=8192+seed=1", 10.0), ("fuser=none+tokens=8192+seed=1", 5.5)):
            os.makedirs(os.path.join(t, "r0", name))
            with open(os.path.join(t, "r0", name, "result.json"), "w") as fh:
                json.dump({"status": "done", "seconds": secs, **({"cpu_seconds": secs - 1} if "glu" in name else {})}, fh)
        with open(os.path.join(t, "r0", "multiplier.json"), "w") as fh:
            json.dump({"fbt": [{"mode": "standard", "tokens": 8192, "seeds": ["1", "2"], "loss": [2.0, 2.2],
                                "loss_difference_stats": {"mean": -0.01, "ci95": [-0.03, 0.01]},
                                "multiplier_stats": {"mean": 1.2, "ci95": [0.9, 1.5]}}]}, fh)
        with open(os.path.join(t, "r0", "soft_overhead.jsonl"), "w") as fh:
            for ov in (0.01, -0.005, 0.02):
                fh.write(json.dumps({"measure": "soft_overhead_128", "standard_median_ms": 0.1, "soft_median_ms": 0.1 * (1 + ov), "overhead": ov}) + "\n")
        with open(os.path.join(t, "r0", "summary.csv"), "w") as fh:
            fh.write("name,fuser,tokens,seed,status,val_loss_pass1,val_loss_pass2,val_loss_pass3\n"
                     "a,glu,8192,1,done,2.0,2.1,2.2\nb,none,8192,1,done,1.9,,\nc,none,8192,2,done,2.1,,\nd,none,16384,1,failed,,,\n")
        rows, compute = summarise(t)
        assert len(rows) == 1 and abs(rows[0]["loss_mean"] - 2.1) < 1e-12, rows
        o = compute["r0"]["soft_overhead"]
        assert o["processes"] == 3 and o["overhead"] == 0.01 and o["min"] == -0.005 and o["max"] == 0.02, o
        c = curves(t)["r0"]
        assert c["baseline"] == {8192: [1.9, 2.1]} and c["fbt"]["fused(1)"] == (8192, [2.1]), c
        m, h = mean_ci([1.9, 2.1])
        assert abs(m - 2.0) < 1e-12 and abs(h - 12.706 * 0.1414213562 / math.sqrt(2)) < 1e-6, (m, h)
        assert compute["r0"]["seconds"] == 14.5 and compute["r0"]["wall_seconds"] == 15.5 and compute["r0"]["done"] == 2, compute
        assert compute["r0"]["cpu_recorded"] == 1, compute
        assert params_of("rung r0: D 64, 123648 parameters (baseline); N") == 123648
        assert fmt_stats({"mean": 1.2, "ci95": [0.9, 1.5]}, "{:.2f}", "x") == "1.20x [0.90x, 1.50x]"
    print("scale_summary.py self-test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
