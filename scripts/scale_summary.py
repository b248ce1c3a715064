#!/usr/bin/env python3
"""scale_summary.py: the scale ladder's table (docs/EXPERIMENTS.md, "Scale"; issue 48) from the rungs' results.

    python3 scripts/scale_summary.py OUT_DIR [--json FILE]
    python3 scripts/scale_summary.py --self-test

OUT_DIR is scripts/experiments.sh scale's: OUT_DIR/<rung>/ (an `fbt ablate` out_dir, with multiplier.json from
scripts/multiplier.py) and OUT_DIR/grids/<rung>.json. Prints markdown, one row per rung and decoding mode: the
baseline's parameters and token budget N, the full-bandwidth model's validation loss (mean over seeds, and its
difference from the baseline at N with the 95% interval paired by seed), the token multiplier with its interval
(scripts/multiplier.py's per-seed fits), and then the compute each rung took (the runs' training seconds, summed
from their result.json) and in all. --json also writes the rows and the compute.
"""
import glob
import json
import os
import sys
import tempfile


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


def summarise(out_dir):
    rows, compute = [], {}
    for rung_dir in sorted(d for d in glob.glob(os.path.join(out_dir, "r*")) if os.path.isdir(d)):
        rung = os.path.basename(rung_dir)
        grid_path = os.path.join(out_dir, "grids", rung + ".json")
        grid = load(grid_path) if os.path.exists(grid_path) else {}
        results = [load(p) for p in glob.glob(os.path.join(rung_dir, "*", "result.json"))]
        secs = sum(r.get("seconds", 0.0) for r in results if r.get("status") == "done")
        compute[rung] = {"runs": len(results), "done": sum(r.get("status") == "done" for r in results), "seconds": secs}
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
    out_dir, json_out = argv[1], None
    if len(argv) >= 4 and argv[2] == "--json":
        json_out = argv[3]
    rows, compute = summarise(out_dir)
    print("| rung | parameters | N tokens | mode | seeds | FBT loss | FBT - baseline at N [95% CI] | token multiplier [95% CI] |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        p = params_of(r["comment"])
        mult = fmt_stats(r["multiplier"], "{:.2f}", "x") if r["multiplier"] else ("- (" + r["multiplier_note"] + ")" if r["multiplier_note"] else "-")
        print("| %s | %s | %.3gM | %s | %d | %.4f | %s | %s |" % (r["rung"], "%.3gM" % (p / 1e6) if p else "?", r["tokens"] / 1e6, r["mode"],
                                                            len(r["seeds"]), r["loss_mean"], fmt_stats(r["loss_difference"], "{:+.4f}"), mult))
    total = sum(c["seconds"] for c in compute.values())
    print("\nCompute (training seconds of the finished runs, summed from result.json):\n")
    print("| rung | runs done | CPU-seconds | CPU-hours |")
    print("|---|---|---|---|")
    for rung, c in compute.items():
        print("| %s | %d of %d | %.0f | %.2f |" % (rung, c["done"], c["runs"], c["seconds"], c["seconds"] / 3600))
    print("| all | %d | %.0f | %.2f |" % (sum(c["done"] for c in compute.values()), total, total / 3600))
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
                json.dump({"status": "done", "seconds": secs}, fh)
        with open(os.path.join(t, "r0", "multiplier.json"), "w") as fh:
            json.dump({"fbt": [{"mode": "standard", "tokens": 8192, "seeds": ["1", "2"], "loss": [2.0, 2.2],
                                "loss_difference_stats": {"mean": -0.01, "ci95": [-0.03, 0.01]},
                                "multiplier_stats": {"mean": 1.2, "ci95": [0.9, 1.5]}}]}, fh)
        rows, compute = summarise(t)
        assert len(rows) == 1 and abs(rows[0]["loss_mean"] - 2.1) < 1e-12, rows
        assert compute["r0"]["seconds"] == 15.5 and compute["r0"]["done"] == 2, compute
        assert params_of("rung r0: D 64, 123648 parameters (baseline); N") == 123648
        assert fmt_stats({"mean": 1.2, "ci95": [0.9, 1.5]}, "{:.2f}", "x") == "1.20x [0.90x, 1.50x]"
    print("scale_summary.py self-test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
