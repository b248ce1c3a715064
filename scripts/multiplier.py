#!/usr/bin/env python3
"""multiplier.py: the token multiplier of an `fbt ablate` grid (spec section 7).

    python3 scripts/multiplier.py OUT_DIR [--json FILE]

OUT_DIR is the out_dir of a grid like examples/experiments/multiplier.json: baselines (fuser none) at
several token budgets, full-bandwidth runs at the smallest budget N. Prints markdown:

1. The baselines' final validation losses per budget (mean over seeds, min..max) and the fit
   L(n) = E + A n^-alpha (least squares over alpha on a fine grid, E and A linear for each alpha).
2. Per full-bandwidth configuration and decoding mode, its loss, the baseline tokens n* with
   L(n*) = that loss, the token multiplier n*/N and the multiplier at matched compute n*/C (C = tokens x
   mean passes actually trained). Modes: standard = pass 1, fused(1) = pass 2, fused(2) = pass 3 (each
   compared with the baselines' pass-1 curve on the same validation windows), sequential = token-by-token
   decoding with true feedback (compared with the baselines' token-by-token curve on the same windows).
   n* outside the baselines' range is an extrapolation and is marked; a loss below the fit's floor E
   has no n* at all ("beyond the fit").
(The stability table of the same runs: scripts/tables.py OUT_DIR --kind contraction.)

Pure Python (no numpy). Exit status 1 with a message when the grid lacks what the fit needs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid_results import load_results  # noqa: E402


def cfg(r: dict, key: str) -> str:
    return r["config"][key]


def fit_power_law(ns: list, ls: list):
    """L(n) = E + A n^-alpha, least squares. Returns (E, A, alpha, rms residual)."""
    best = None
    x0 = min(ns)
    for i in range(1, 3001):  # alpha in (0, 3]
        alpha = i * 0.001
        u = [(n / x0) ** -alpha for n in ns]  # scaled so that A is O(1)
        m = len(ns)
        su, suu = sum(u), sum(v * v for v in u)
        sl, sul = sum(ls), sum(a * b for a, b in zip(u, ls))
        det = m * suu - su * su
        if abs(det) < 1e-300:
            continue
        a_ = (m * sul - su * sl) / det
        e_ = (sl - a_ * su) / m
        sse = sum((e_ + a_ * v - l) ** 2 for v, l in zip(u, ls))
        if best is None or sse < best[3]:
            best = (e_, a_ * x0 ** alpha, alpha, sse)
    e_, a_, alpha, sse = best
    return e_, a_, alpha, math.sqrt(sse / len(ns))


def solve_n(E: float, A: float, alpha: float, L: float):
    if A <= 0 or L <= E:
        return None
    return (A / (L - E)) ** (1.0 / alpha)


def mean(v):
    return sum(v) / len(v)


def spread(v):
    return f"{min(v):.4f}..{max(v):.4f}" if len(v) > 1 else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--json", help="also write the numbers as JSON here")
    a = ap.parse_args(argv)
    runs = load_results(a.out_dir, "multiplier.py", done_only=True)
    base = [r for r in runs if cfg(r, "fuser") == "none"]
    fbt = [r for r in runs if cfg(r, "fuser") != "none"]
    budgets = sorted({r["tokens"] for r in base})
    if len(budgets) < 3:
        print(f"multiplier.py: {a.out_dir}: the fit needs finished baselines (fuser none) at >= 3 token budgets; found {budgets}",
              file=sys.stderr)
        return 1
    out = {"baselines": [], "fits": {}, "fbt": []}
    print(f"## Token multiplier ({a.out_dir})\n")
    print("Baselines (fuser none), final validation loss, mean over seeds (min..max):\n")
    print("| tokens | seeds | pass-1 loss | token-by-token loss |")
    print("|---:|---:|---|---|")
    curves = {"parallel": ([], []), "sequential": ([], [])}
    for n in budgets:
        rs = [r for r in base if r["tokens"] == n]
        lp = [r["eval"]["val_loss"][0] for r in rs]
        lq = [r["eval"]["seq_loss_standard"] for r in rs if "seq_loss_standard" in r["eval"]]
        curves["parallel"][0].append(n), curves["parallel"][1].append(mean(lp))
        if lq:
            curves["sequential"][0].append(n), curves["sequential"][1].append(mean(lq))
        print(f"| {n / 1e6:.4g}M | {len(rs)} | {mean(lp):.4f} {spread(lp)} | {mean(lq):.4f} {spread(lq)} |" if lq else
              f"| {n / 1e6:.4g}M | {len(rs)} | {mean(lp):.4f} {spread(lp)} | - |")
        out["baselines"].append({"tokens": n, "seeds": len(rs), "pass1": lp, "sequential": lq})
    print()
    fits = {}
    for k, (ns, ls) in curves.items():
        if len(ns) >= 3:
            E, A, alpha, rms = fit_power_law(ns, ls)
            fits[k] = (E, A, alpha)
            out["fits"][k] = {"E": E, "A": A, "alpha": alpha, "rms_residual": rms}
            print(f"Fit ({k} losses): L(n) = {E:.4f} + {A:.4g} n^-{alpha:.3f}  (rms residual {rms:.2e})")
            if alpha <= 0.001 or alpha >= 3.0:
                print(f"  note: alpha sits at the end of the searched range (0.001..3): the {len(ns)} points do not "
                      "determine a power law (noise, or a curve bending the other way); read n* with care")
                out["fits"][k]["at_bound"] = True
    print()
    lo, hi = budgets[0], budgets[-1]
    groups = {}  # one row group per configuration: the run's name without its seed
    for r in fbt:
        key = "+".join(p for p in r["name"].split("+") if not p.startswith("seed="))
        groups.setdefault(key, []).append(r)
    print("Full-bandwidth runs: loss per decoding mode, the baseline tokens n* reaching it, multiplier n*/N and at matched "
          "compute n*/C (C = tokens x mean passes trained):\n")
    print("| run | pass mix | N | C/N | mode | loss (seeds: min..max) | n* | multiplier | at matched compute |")
    print("|---|---|---:|---:|---|---|---:|---:|---:|")
    for key, rs in sorted(groups.items()):
        mix, n = cfg(rs[0], "pass_mix"), rs[0]["tokens"]
        comp = mean([r["compute_tokens"] for r in rs])
        modes = [("standard", "parallel", [r["eval"]["val_loss"][0] for r in rs])]
        for k in range(1, len(rs[0]["eval"]["val_loss"])):
            modes.append((f"fused({k})", "parallel", [r["eval"]["val_loss"][k] for r in rs]))
        sq = [r["eval"]["seq_loss_soft"] for r in rs if "seq_loss_soft" in r["eval"]]
        if sq:
            modes.append(("sequential (soft)", "sequential", sq))
        for mode, curve, ls in modes:
            L = mean(ls)
            row = {"run": key, "pass_mix": mix, "tokens": n, "compute_tokens": comp, "mode": mode, "loss": ls}
            if curve not in fits:
                continue
            ns = solve_n(*fits[curve], L)
            if ns is None:
                cell, m1, m2 = "beyond the fit", "-", "-"
            else:
                flag = "" if lo * 0.999 <= ns <= hi * 1.001 else " (extrapolated)"
                cell, m1, m2 = f"{ns / 1e6:.3g}M{flag}", f"{ns / n:.2f}x", f"{ns / comp:.2f}x"
                row.update({"n_star": ns, "multiplier": ns / n, "multiplier_matched_compute": ns / comp, "extrapolated": bool(flag)})
            out["fbt"].append(row)
            print(f"| {key} | {mix} | {n / 1e6:.4g}M | {comp / n:.3f} | {mode} | {L:.4f} {spread(ls)} | {cell} | {m1} | {m2} |")
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
