#!/usr/bin/env python3
"""multiplier.py: the token multiplier of an `fbt ablate` grid (spec section 7), per seed, with confidence intervals.

    python3 scripts/multiplier.py OUT_DIR [--json FILE]
    python3 scripts/multiplier.py --self-test

OUT_DIR is the out_dir of a grid like examples/experiments/multiplier.json: baselines (fuser none) at
three or more token budgets (any set, e.g. 0.5x to 4x N), full-bandwidth runs at a budget N, one run per
seed of each. Prints markdown:

1. A header: the seeds, the presets (config.preset), and the task's closed-form optimal loss when the
   runs' result.json hold `optimal_loss` (then every loss below also shows its excess over it).
2. The baselines' final validation losses per budget (mean over seeds, min..max) and the fits
   L(n) = E + A n^-alpha (least squares over alpha on a fine grid, refined; E and A linear for each alpha):
   one to the seed means and one per seed. The bracket [min, max] of the baseline budgets.
   Baselines that differ in an override other than tokens, steps, seed and fuser (e.g. preset=v1) are a
   family of their own with their own fits; each full-bandwidth configuration is compared with the family
   whose overrides it shares.
3. Per full-bandwidth configuration (its overrides without the seed) and decoding mode: its loss, the
   baseline tokens n* with L(n*) = that loss, the token multiplier n*/N and the multiplier at matched
   compute n*/C (C = compute_tokens, tokens x mean passes actually trained), from the fit of the seed
   means; then per seed (seed s's baselines fitted, seed s's run): the mean multiplier with its 95%
   confidence interval (Student t over the per-seed values, df = seeds - 1) and the spread min..max.
   With one seed no interval is possible, and the table says so.
   Modes: standard = pass 1, fused(1) = pass 2, fused(2) = pass 3 (each compared with the baselines' pass-1
   curve on the same validation windows), sequential (soft) = token-by-token decoding with true feedback
   (`seq_loss_soft`, compared with the baselines' token-by-token curve `seq_loss_standard`).
   An n* outside the bracket is an extrapolation: flagged "(extrapolated)" in the table and
   `"extrapolated": true` in the JSON, for the fit of the means, each seed and the per-seed mean; a mean
   inside the bracket with some seeds outside reads "(extrapolated: seed 3)", one whose interval reaches
   outside "(CI leaves the bracket)". (The interval is symmetric in the multiplier: with 2 or 3 seeds it can
   reach below 0.) A loss below the fit's floor E has no n* at all ("beyond the fit").
4. The loss difference FBT - baseline at the same tokens N per mode, paired by seed (the baseline run at N
   when N is one of its budgets, else that seed's fit at N), mean with its 95% confidence interval.
(The stability table of the same runs: scripts/tables.py OUT_DIR --kind contraction.)

--self-test builds synthetic grids in a temporary directory (a known power law and known multipliers: three
seeds that differ in E and A, with extrapolated and beyond-the-fit cases; three noisy seeds, and one of them
alone; baseline families by preset) and checks the numbers and the flags; exit status 1 on a failure (ctest
scripts.multiplier_self_test).

Pure Python (no numpy). Exit status 1 with a message when the grid lacks what the fit needs.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import statistics
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid_results import load_results  # noqa: E402

# Student t quantile t_{0.975, df}: a two-sided 95% interval is mean +- T975[df] * sd / sqrt(n), df = n - 1.
# Above df 30 the df-30 value is used (slightly wider than the exact interval: on the safe side).
T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 6: 2.4469, 7: 2.3646, 8: 2.3060, 9: 2.2622,
        10: 2.2281, 11: 2.2010, 12: 2.1788, 13: 2.1604, 14: 2.1448, 15: 2.1314, 16: 2.1199, 17: 2.1098,
        18: 2.1009, 19: 2.0930, 20: 2.0860, 21: 2.0796, 22: 2.0739, 23: 2.0687, 24: 2.0639, 25: 2.0595,
        26: 2.0555, 27: 2.0518, 28: 2.0484, 29: 2.0452, 30: 2.0423}

NOT_FAMILY = ("tokens", "steps", "seed", "fuser")  # overrides that do not make baselines a family of their own
CURVES = ("parallel", "sequential")                # parallel: val_loss[0]; sequential: seq_loss_standard
BRACKET_TOL = 1e-3                                 # n* within 0.1% of a bracket end counts as inside


# ----------------------------------------------------------------------------------------------------------
# The fit L(n) = E + A n^-alpha

def _linear_fit(ns: list, ls: list, alpha: float, x0: float):
    """E and a (A = a x0^alpha) by least squares for one alpha. Returns (E, a, sse) or None when singular."""
    u = [(n / x0) ** -alpha for n in ns]  # scaled so that a is O(1)
    m = len(ns)
    su, suu = sum(u), sum(v * v for v in u)
    sl, sul = sum(ls), sum(a * b for a, b in zip(u, ls))
    det = m * suu - su * su
    if abs(det) < 1e-300:
        return None
    a_ = (m * sul - su * sl) / det
    e_ = (sl - a_ * su) / m
    return e_, a_, sum((e_ + a_ * v - l) ** 2 for v, l in zip(u, ls))


def fit_power_law(ns: list, ls: list) -> dict:
    """L(n) = E + A n^-alpha, least squares: alpha on the grid 0.001..3 (step 0.001), then refined by a golden
    section search within one grid step. Returns E, A, alpha, rms_residual, at_bound (alpha at an end of the grid:
    the points do not determine a power law) and the bracket [min n, max n]."""
    x0 = min(ns)
    best, best_i = None, 0
    for i in range(1, 3001):
        r = _linear_fit(ns, ls, i * 0.001, x0)
        if r is not None and (best is None or r[2] < best[2]):
            best, best_i = r + (i * 0.001,), i
    lo, hi = max(0.001, best[3] - 0.001), min(3.0, best[3] + 0.001)  # within the searched range
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        ra, rb = _linear_fit(ns, ls, a, x0), _linear_fit(ns, ls, b, x0)
        if ra is None or rb is None:
            break
        if ra[2] < rb[2]:
            hi = b
        else:
            lo = a
    r = _linear_fit(ns, ls, (lo + hi) / 2, x0)
    if r is not None and r[2] <= best[2]:
        best = r + ((lo + hi) / 2,)
    e_, a_, sse, alpha = best
    return {"E": e_, "A": a_ * x0 ** alpha, "alpha": alpha, "rms_residual": math.sqrt(sse / len(ns)),
            "at_bound": best_i in (1, 3000), "bracket": [min(ns), max(ns)], "points": len(ns)}


def fit_value(fit: dict, n: float) -> float:
    return fit["E"] + fit["A"] * n ** -fit["alpha"]


def solve_n(fit: dict, L: float):
    """n* with L(n*) = L: (n*, "") or (None, why)."""
    if fit["A"] <= 0:
        return None, "fit not decreasing"
    if L <= fit["E"]:
        return None, "beyond the fit"
    return (fit["A"] / (L - fit["E"])) ** (1.0 / fit["alpha"]), ""


def outside(n: float, bracket: list) -> bool:
    """Whether n lies outside the baseline budgets [min, max]: an extrapolation."""
    return not (bracket[0] * (1 - BRACKET_TOL) <= n <= bracket[1] * (1 + BRACKET_TOL))


# ----------------------------------------------------------------------------------------------------------
# Statistics over seeds

def mean(v):
    return sum(v) / len(v)


def seed_stats(v: list) -> dict:
    """n, mean, sd, the 95% Student t interval (None with one value) and min..max of per-seed values."""
    n = len(v)
    m = mean(v)
    if n < 2:
        return {"n": n, "mean": m, "sd": None, "ci95": None, "min": m, "max": m}
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1))
    h = T975[min(n - 1, 30)] * sd / math.sqrt(n)
    return {"n": n, "mean": m, "sd": sd, "ci95": [m - h, m + h], "min": min(v), "max": max(v)}


def loss_cell(v) -> str:
    """Mean over seeds, then min..max when there are several."""
    return f"{mean(v):.4f}" + (f" {min(v):.4f}..{max(v):.4f}" if len(v) > 1 else "")


# ----------------------------------------------------------------------------------------------------------
# Reading the grid

def cfg(r: dict, key: str) -> str:
    return r["config"][key]


def overrides(r: dict) -> list:
    """The run's overrides [(key, value)] (result.json "overrides"; else parsed from its name k=v+k=v)."""
    if "overrides" in r:
        return [(str(k), str(v)) for k, v in r["overrides"]]
    return [tuple(p.split("=", 1)) for p in r["name"].split("+") if "=" in p]


def seed_of(r: dict) -> str:
    return str(r["config"].get("seed", dict(overrides(r)).get("seed", "?")))


def seed_order(s: str):
    return (0, int(s), s) if s.lstrip("-").isdigit() else (1, 0, s)


def config_key(r: dict) -> str:
    """A full-bandwidth configuration: the run's name without its seed (what the seeds average over)."""
    return "+".join(p for p in r["name"].split("+") if not p.startswith("seed="))


def same_value(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return str(a) == str(b)


def optimal_of(r: dict):
    """The task's closed-form optimal loss of the evaluation windows, when result.json has one (eval or top level)."""
    for v in (r.get("eval", {}).get("optimal_loss"), r.get("optimal_loss")):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def curve_loss(r: dict, curve: str):
    e = r["eval"]
    return e["val_loss"][0] if curve == "parallel" else e.get("seq_loss_standard")


def build_families(base: list) -> list:
    """Baselines grouped by their overrides other than tokens/steps/seed/fuser, each with its losses per
    (budget, seed) and its fits (to the seed means: "all"; per seed: "seeds")."""
    fams = {}
    for r in base:
        key = tuple((k, v) for k, v in overrides(r) if k not in NOT_FAMILY)
        fams.setdefault(key, []).append(r)
    out = []
    for key, rs in sorted(fams.items()):
        f = {"key": key, "runs": rs, "budgets": sorted({round(r["tokens"]) for r in rs}),
             "seeds": sorted({seed_of(r) for r in rs}, key=seed_order), "loss": {}, "fits": {}}
        for curve in CURVES:
            pts = {}
            for r in rs:
                L = curve_loss(r, curve)
                if L is None:
                    continue
                k = (round(r["tokens"]), seed_of(r))
                if k in pts:
                    raise SystemExit(f"multiplier.py: {r['name']}: a second baseline run at {k[0]} tokens with seed {k[1]}")
                pts[k] = L
            f["loss"][curve] = pts
            ns = sorted({n for n, _ in pts})
            fit_all = fit_power_law(ns, [mean([L for (n2, _), L in pts.items() if n2 == n]) for n in ns]) if len(ns) >= 3 else None
            per_seed = {}
            for s in f["seeds"]:
                sn = sorted(n for n, s2 in pts if s2 == s)
                if len(sn) >= 3:
                    per_seed[s] = fit_power_law(sn, [pts[(n, s)] for n in sn])
            f["fits"][curve] = {"all": fit_all, "seeds": per_seed}
        out.append(f)
    return out


def family_name(f: dict) -> str:
    return "+".join(f"{k}={v}" for k, v in f["key"]) or "(all baselines)"


def match_family(r: dict, families: list):
    """The baseline family whose overrides the run shares (its own override, else its config value); the most
    specific when several do. Returns (family, "") or (None, why)."""
    ov, conf = dict(overrides(r)), r["config"]

    def has(k, v):
        if k in ov:
            return same_value(ov[k], v)
        return k in conf and same_value(conf[k], v)
    ok = [f for f in families if all(has(k, v) for k, v in f["key"])]
    if not ok:
        return None, "no baseline family shares its overrides (" + ", ".join(family_name(f) for f in families) + ")"
    most = max(len(f["key"]) for f in ok)
    top = [f for f in ok if len(f["key"]) == most]
    if len(top) > 1:
        return None, "it matches several baseline families (" + ", ".join(family_name(f) for f in top) + ")"
    return top[0], ""


# ----------------------------------------------------------------------------------------------------------
# One full-bandwidth configuration and decoding mode

def analyse_mode(fam: dict, curve: str, by_seed: dict, losses: dict, N: float) -> dict:
    """losses: seed -> FBT loss in this mode. The fit of the seed means, then each seed against its own fit."""
    fits = fam["fits"][curve]
    fa = fits["all"]
    seeds = sorted(losses, key=seed_order)
    comp = mean([by_seed[s]["compute_tokens"] for s in seeds])
    L = mean([losses[s] for s in seeds])
    row = {"seeds": seeds, "loss": [losses[s] for s in seeds], "tokens": N, "compute_tokens": comp,
           "bracket": fa["bracket"], "bracket_multiplier": [fa["bracket"][0] / N, fa["bracket"][1] / N]}
    ns, why = solve_n(fa, L)
    row["fit_of_means"] = ({"n_star": ns, "multiplier": ns / N, "multiplier_matched_compute": ns / comp,
                            "extrapolated": outside(ns, fa["bracket"])} if ns is not None else {"n_star": None, "why": why})
    per, notes = [], []
    for s in seeds:
        r = by_seed[s]
        e = {"seed": s, "loss": losses[s], "compute_tokens": r["compute_tokens"]}
        base_at_n = fam["loss"][curve].get((round(N), s))
        fs = fits["seeds"].get(s)
        if base_at_n is not None:
            e.update(baseline_loss=base_at_n, baseline_from_fit=False)
        elif fs is not None:
            e.update(baseline_loss=fit_value(fs, N), baseline_from_fit=True)
        if "baseline_loss" in e:
            e["loss_difference"] = losses[s] - e["baseline_loss"]
        if fs is None:
            e.update(n_star=None, why=f"no fit for seed {s} (baselines at fewer than 3 budgets)")
        else:
            n_s, why_s = solve_n(fs, losses[s])
            e.update(n_star=n_s, bracket=fs["bracket"])
            if n_s is None:
                e["why"] = why_s
            else:
                e.update(multiplier=n_s / N, multiplier_matched_compute=n_s / r["compute_tokens"],
                         extrapolated=outside(n_s, fs["bracket"]))
        if e["n_star"] is None:
            notes.append(f"seed {s}: {e['why']}")
        per.append(e)
    row["per_seed"] = per
    if notes:
        row["multiplier_stats"] = row["multiplier_matched_compute_stats"] = None
        row["multiplier_note"] = "; ".join(notes)
    else:
        st = seed_stats([e["multiplier"] for e in per])
        sc = seed_stats([e["multiplier_matched_compute"] for e in per])
        ext = [e["seed"] for e in per if e["extrapolated"]]
        st["extrapolated"] = outside(st["mean"] * N, fa["bracket"])
        sc["extrapolated"] = outside(sc["mean"] * comp, fa["bracket"])
        for x, scale in ((st, N), (sc, comp)):
            x["seeds_extrapolated"] = ext
            x["ci_extrapolated"] = x["ci95"] is not None and any(outside(c * scale, fa["bracket"]) for c in x["ci95"])
        row["multiplier_stats"], row["multiplier_matched_compute_stats"] = st, sc
    diffs = [e["loss_difference"] for e in per if "loss_difference" in e]
    row["loss_difference_stats"] = seed_stats(diffs) if len(diffs) == len(per) else None
    row["baseline_from_fit"] = any(e.get("baseline_from_fit") for e in per)
    return row


def fmt_n(n: float) -> str:
    return f"{n / 1e6:.3g}M"


def flag_of(st: dict) -> str:
    if st["extrapolated"]:
        return " (extrapolated)"
    if st["seeds_extrapolated"]:
        s = st["seeds_extrapolated"]
        return f" (extrapolated: seed{'s' if len(s) > 1 else ''} {', '.join(s)})"
    if st["ci_extrapolated"]:
        return " (CI leaves the bracket)"
    return ""


def fmt_stat(st, unit: str = "x", signed: bool = False) -> str:
    f = "{:+.4f}" if signed else "{:.2f}"
    if st["ci95"] is None:
        return f.format(st["mean"]) + unit + " (1 seed: no CI)"
    return f.format(st["mean"]) + unit + " [" + ", ".join(f.format(c) + unit for c in st["ci95"]) + "]"


def fmt_range(st, unit: str = "x", signed: bool = False) -> str:
    f = "{:+.4f}" if signed else "{:.2f}"
    return "-" if st is None or st["n"] < 2 else f.format(st["min"]) + unit + ".." + f.format(st["max"]) + unit


# ----------------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--json", help="also write the numbers as JSON here")
    ap.add_argument("--self-test", action="store_true", help="check the fits and flags on synthetic grids; exit 1 on a failure")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.out_dir:
        ap.error("OUT_DIR is required (or --self-test)")
    runs = load_results(a.out_dir, "multiplier.py", done_only=True)
    base = [r for r in runs if cfg(r, "fuser") == "none"]
    fbt = [r for r in runs if cfg(r, "fuser") != "none"]
    families = build_families(base)
    usable = [f for f in families if f["fits"]["parallel"]["all"] is not None]
    if not usable:
        found = "; ".join(f"{family_name(f)}: {[int(n) for n in f['budgets']]}" for f in families) or "none"
        print(f"multiplier.py: {a.out_dir}: the fit needs finished baselines (fuser none) at >= 3 token budgets; found {found}",
              file=sys.stderr)
        return 1

    seeds = sorted({seed_of(r) for r in runs}, key=seed_order)
    presets = sorted({str(r["config"]["preset"]) for r in runs if "preset" in r["config"]})
    optimal = sorted({o for o in (optimal_of(r) for r in runs) if o is not None})
    out = {"out_dir": a.out_dir, "seeds": seeds, "presets": presets, "optimal_loss": optimal or None,
           "families": [], "fbt": [], "unmatched": []}
    print(f"## Token multiplier ({a.out_dir})\n")
    print(f"Seeds: {', '.join(seeds)}. " + (
        "95% confidence intervals: Student t over the per-seed values (df = seeds - 1)." if len(seeds) > 1 else
        "One seed: no confidence interval is possible (it needs two seeds or more); the per-seed columns give the single value."))
    if presets:
        print(f"Preset{'s' if len(presets) > 1 else ''}: {', '.join(presets)}.")
    if optimal:
        print("Optimal loss (the task's closed form, result.json `optimal_loss`): " + ", ".join(f"{o:.4f}" for o in optimal) +
              ("" if len(optimal) == 1 else " (differs between runs; each loss's excess is over its own runs' optimum)") +
              ". \"excess\" = loss - optimal loss.")
        if any(r["config"].get("seq_eval_windows") != r["config"].get("eval_windows") for r in runs):
            print("  (the optimum is that of the parallel evaluation's windows; the token-by-token losses use the first "
                  "seq_eval_windows of them, so their excess is approximate)")
    print()

    def excess(rs_):
        o = [optimal_of(r) for r in rs_]
        return None if not optimal or any(v is None for v in o) else mean(o)

    for f in families:
        name = family_name(f)
        fo = {"overrides": dict(f["key"]), "budgets": f["budgets"], "seeds": f["seeds"], "baselines": [], "fits": {}}
        print(f"### Baselines (fuser none){'' if len(families) == 1 else ': ' + name}\n")
        print("Final validation loss, mean over seeds (min..max):\n")
        print("| tokens | seeds | pass-1 loss | token-by-token loss |" + (" excess pass-1 | excess token-by-token |" if optimal else ""))
        print("|---:|---:|---|---|" + ("---:|---:|" if optimal else ""))
        for n in f["budgets"]:
            rs = sorted([r for r in f["runs"] if round(r["tokens"]) == n], key=lambda r: seed_order(seed_of(r)))
            lp = [curve_loss(r, "parallel") for r in rs]
            lq = [curve_loss(r, "sequential") for r in rs if curve_loss(r, "sequential") is not None]
            o = excess(rs)
            cells = [loss_cell(lp), loss_cell(lq) if lq else "-"]
            if optimal:
                cells += [f"{mean(lp) - o:.4f}" if o is not None else "-", f"{mean(lq) - o:.4f}" if o is not None and lq else "-"]
            print(f"| {n / 1e6:.4g}M | {len(rs)} | " + " | ".join(cells) + " |")
            fo["baselines"].append({"tokens": n, "seeds": [seed_of(r) for r in rs], "pass1": lp, "sequential": lq,
                                    "optimal_loss": o})
        print()
        for curve in CURVES:
            fits = f["fits"][curve]
            fo["fits"][curve] = fits
            fa = fits["all"]
            if fa is None:
                continue
            label = "mean over seeds" if len(f["seeds"]) > 1 else f"seed {f['seeds'][0]}"
            print(f"Fit ({curve} losses): L(n) = {fa['E']:.4f} + {fa['A']:.4g} n^-{fa['alpha']:.3f}  "
                  f"(rms residual {fa['rms_residual']:.2e}; {label}; {fa['points']} budgets)")
            if len(f["seeds"]) > 1:
                for s, fs in fits["seeds"].items():
                    print(f"  seed {s}: L(n) = {fs['E']:.4f} + {fs['A']:.4g} n^-{fs['alpha']:.3f}  (rms residual {fs['rms_residual']:.2e})")
                for s in f["seeds"]:
                    if s not in fits["seeds"]:
                        print(f"  seed {s}: no fit (baselines at fewer than 3 budgets)")
            bounds = [s for s, fs in fits["seeds"].items() if fs["at_bound"]] if len(f["seeds"]) > 1 else []
            if fa["at_bound"] or bounds:
                which = "the fit of the means" if fa["at_bound"] else ""
                which += (" and " if which and bounds else "") + (f"seed {', '.join(bounds)}" if bounds else "")
                print(f"  note: alpha sits at the end of the searched range (0.001..3) in {which}: the points do not "
                      "determine a power law (noise, or a curve bending the other way); read n* with care")
        lo, hi = f["fits"]["parallel"]["all"]["bracket"] if f["fits"]["parallel"]["all"] else (f["budgets"][0], f["budgets"][-1])
        fo["bracket"] = [lo, hi]
        print(f"\nBracket of the baseline budgets: [{fmt_n(lo)}, {fmt_n(hi)}]. An n* outside it is an extrapolation, "
              "flagged \"(extrapolated)\"; a loss below the fit's floor E is \"beyond the fit\".\n")
        out["families"].append(fo)

    groups = {}
    for r in fbt:
        groups.setdefault(config_key(r), []).append(r)
    rows = []
    for key, rs in sorted(groups.items()):
        by_seed = {}
        for r in rs:
            if seed_of(r) in by_seed:
                raise SystemExit(f"multiplier.py: {key}: two runs with seed {seed_of(r)}")
            by_seed[seed_of(r)] = r
        fam, why = match_family(rs[0], families)
        if fam is not None and fam["fits"]["parallel"]["all"] is None:
            fam, why = None, f"its baseline family {family_name(fam)} has fewer than 3 budgets"
        if fam is None:
            out["unmatched"].append({"run": key, "why": why})
            continue
        Ns = {round(r["tokens"]) for r in rs}
        if len(Ns) > 1:
            raise SystemExit(f"multiplier.py: {key}: its seeds ran at different token budgets {sorted(Ns)}")
        N = rs[0]["tokens"]
        kmax = min(len(r["eval"]["val_loss"]) for r in rs)
        modes = [("standard" if k == 0 else f"fused({k})", "parallel", {s: r["eval"]["val_loss"][k] for s, r in by_seed.items()})
                 for k in range(kmax)]
        sq = {s: r["eval"]["seq_loss_soft"] for s, r in by_seed.items() if "seq_loss_soft" in r["eval"]}
        if sq:
            modes.append(("sequential (soft)", "sequential", sq))
        for mode, curve, losses in modes:
            if fam["fits"][curve]["all"] is None:
                continue
            row = {"run": key, "family": family_name(fam), "pass_mix": cfg(rs[0], "pass_mix"), "mode": mode, "curve": curve}
            row.update(analyse_mode(fam, curve, by_seed, losses, N))
            o = excess([by_seed[s] for s in row["seeds"]])
            row["optimal_loss"] = o
            row["excess"] = mean(row["loss"]) - o if o is not None else None
            rows.append(row)
    out["fbt"] = rows

    print("### Full-bandwidth runs: token multiplier\n")
    print("Per decoding mode: the loss, the baseline tokens n* reaching it, the multiplier n*/N and at matched compute "
          "n*/C (C = tokens x mean passes trained), from the fit of the seed means; then the per-seed multipliers "
          "(each seed's run against its own baselines' fit): mean [95% CI] and min..max. \"bracket\": the baseline "
          "budgets as multiples of N.\n")
    print("| run | pass mix | N | C/N | bracket | mode | loss (seeds: min..max) |" + (" excess |" if optimal else "") +
          " n* | multiplier | at matched compute | per seed: multiplier | per seed: min..max | per seed: at matched compute |")
    print("|---|---|---:|---:|---:|---|---|" + ("---:|" if optimal else "") + "---:|---:|---:|---|---:|---|")
    for row in rows:
        N, comp = row["tokens"], row["compute_tokens"]
        fm = row["fit_of_means"]
        if fm["n_star"] is None:
            cell, m1, m2 = fm["why"], "-", "-"
        else:
            flag = " (extrapolated)" if fm["extrapolated"] else ""
            cell, m1, m2 = fmt_n(fm["n_star"]) + flag, f"{fm['multiplier']:.2f}x{flag}", f"{fm['multiplier_matched_compute']:.2f}x{flag}"
        st, sc = row["multiplier_stats"], row["multiplier_matched_compute_stats"]
        if st is None:
            p1, p2, p3 = row["multiplier_note"], "-", "-"
        else:
            p1, p2, p3 = fmt_stat(st) + flag_of(st), fmt_range(st), fmt_stat(sc) + flag_of(sc)
        b = row["bracket_multiplier"]
        ex = (f" {row['excess']:.4f} |" if row["excess"] is not None else " - |") if optimal else ""
        print(f"| {row['run']} | {row['pass_mix']} | {N / 1e6:.4g}M | {comp / N:.3f} | {b[0]:.2f}x..{b[1]:.2f}x | {row['mode']} | "
              f"{loss_cell(row['loss'])} |{ex} {cell} | {m1} | {m2} | {p1} | {p2} | {p3} |")
    print()
    print("### Full-bandwidth runs: loss difference to the baseline at the same tokens\n")
    print("FBT - baseline at N, paired by seed (the baseline run at N; \"(fit)\": that seed's fit at N, N not being a "
          "baseline budget); negative = the full-bandwidth run is better.\n")
    print("| run | mode | seeds | FBT loss | baseline loss at N | FBT - baseline: mean [95% CI] | min..max |")
    print("|---|---|---:|---|---|---|---:|")
    for row in rows:
        d = row["loss_difference_stats"]
        bl = [e["baseline_loss"] for e in row["per_seed"] if "baseline_loss" in e]
        bcell = (loss_cell(bl) + (" (fit)" if row["baseline_from_fit"] else "")) if bl else "-"
        dcell = fmt_stat(d, "", signed=True) if d is not None else "no baseline at N for every seed"
        print(f"| {row['run']} | {row['mode']} | {len(row['seeds'])} | {loss_cell(row['loss'])} | "
              f"{bcell} | {dcell} | {fmt_range(d, '', signed=True)} |")
    for u in out["unmatched"]:
        print(f"\nnote: {u['run']}: not compared: {u['why']}")
    if a.json:
        with open(a.json + ".tmp", "w") as fh:
            json.dump(out, fh, indent=1)
        os.replace(a.json + ".tmp", a.json)
    return 0


# ----------------------------------------------------------------------------------------------------------
# --self-test: synthetic grids with known answers

def _write_run(root: str, ovr: list, seed: int, tokens: float, compute: float, conf: dict, ev: dict) -> None:
    name = "+".join(f"{k}={v}" for k, v in ovr + [("seed", str(seed))])
    os.makedirs(os.path.join(root, name))
    c = {"seed": str(seed), "pass_mix": "1:1", "eval_windows": "32", "seq_eval_windows": "32"}
    c.update(conf)
    r = {"name": name, "overrides": [[k, v] for k, v in ovr] + [["seed", str(seed)]], "status": "done",
         "tokens": float(tokens), "compute_tokens": float(compute), "config": c, "eval": ev}
    with open(os.path.join(root, name, "result.json"), "w") as fh:
        json.dump(r, fh)


def _t_cdf(t: float, df: int) -> float:
    """Student t CDF by Simpson's rule on the density (independent of the T975 table)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    m = 4000
    h = t / m
    s = sum((1 if i in (0, m) else 4 if i % 2 else 2) * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(m + 1))
    return 0.5 + c * s * h / 3


def self_test() -> int:
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    def close(got, want, rel, what):
        check(got is not None and abs(got - want) <= rel * abs(want) + 1e-12, f"{what}: got {got}, expected {want}")

    def run(grid):
        buf, err = io.StringIO(), io.StringIO()
        jpath = grid + ".json"
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            rc = main([grid, "--json", jpath])
        d = None
        if rc == 0:
            with open(jpath) as fh:
                d = json.load(fh)
        return rc, buf.getvalue(), d

    def row_of(d, run_, mode):
        rs = [r for r in d["fbt"] if r["run"] == run_ and r["mode"] == mode]
        check(len(rs) == 1, f"one row for {run_} / {mode} (got {len(rs)})")
        return rs[0] if rs else None

    def line_of(md, run_, mode):
        ls = [ln for ln in md.splitlines() if ln.startswith(f"| {run_} | ") and f" | {mode} | " in ln and "x.." in ln]
        check(len(ls) == 1, f"one multiplier table line for {run_} / {mode} (got {len(ls)})")
        return ls[0] if ls else ""

    # 0. The t table against the t distribution.
    for df, t in T975.items():
        p = _t_cdf(t, df)
        check(abs(p - 0.975) < 1e-5, f"T975[{df}] = {t}: CDF {p:.6f}, expected 0.975")

    try:
        with tempfile.TemporaryDirectory() as tmp:
            # A. Three seeds, baselines at 0.5, 1, 2, 3, 4 x N. Seed s's losses follow E_s + A_s n^-alpha exactly (alpha
            # shared, between the grid's steps), so each seed's fit and the fit of the seed means (E = mean E_s,
            # A = mean A_s) are known exactly.
            N = 1.0e6
            grid = os.path.join(tmp, "three_seeds")
            seeds = (1, 2, 3)
            law = {"parallel": {"E": {1: 1.390, 2: 1.400, 3: 1.413}, "A": {1: 30.9, 2: 29.4, 3: 30.0}, "alpha": 0.3137},
                   "sequential": {"E": {1: 1.105, 2: 1.100, 3: 1.091}, "A": {1: 20.0, 2: 21.0, 3: 19.5}, "alpha": 0.2471}}
            opt = 1.0

            def L(curve, s, n):
                p = law[curve]
                return p["E"][s] + p["A"][s] * n ** -p["alpha"]
            for s in seeds:
                for x in (0.5, 1, 2, 3, 4):
                    _write_run(grid, [("fuser", "none"), ("tokens", str(int(x * N)))], s, x * N, x * N, {"fuser": "none"},
                               {"val_loss": [L("parallel", s, x * N)], "seq_loss_standard": L("sequential", s, x * N),
                                "optimal_loss": opt})
            comp = {1: 1.27, 2: 1.28, 3: 1.26}
            # multipliers per seed: (standard, fused(1), fused(2), sequential soft); None = a loss below E_s - 0.01
            known = {"fuser=glu": ([0.80, 0.90, 0.85], [1.5, 1.7, 1.6], [2.0, 2.2, 2.4], [1.2, 1.3, 1.1]),
                     "fuser=glu+pass_mix=2_1": ([5.0, 6.0, 5.5], None, [0.30, 0.35, 0.32], [3.5, 3.9, 4.3])}
            loss = {}
            for key, ms in known.items():
                ovr = [tuple(p.split("=")) for p in key.split("+")]
                for i, s in enumerate(seeds):
                    vals = [L("parallel", s, m[i] * N) if m else law["parallel"]["E"][s] - 0.01 for m in ms[:3]]
                    soft = L("sequential", s, ms[3][i] * N)
                    for k, v in enumerate(vals + [soft]):
                        loss[(key, k, s)] = v
                    _write_run(grid, ovr + [("tokens", str(int(N)))], s, N, comp[s] * N, {"fuser": "glu"},
                               {"val_loss": vals, "seq_loss_standard": soft + 0.1, "seq_loss_soft": soft, "optimal_loss": opt})
            rc, md, d = run(grid)
            check(rc == 0, f"A: exit status {rc}")
            if rc == 0:
                check("Optimal loss (the task's closed form, result.json `optimal_loss`): 1.0000" in md, "A: the optimum in the header")
                check("Seeds: 1, 2, 3. 95% confidence intervals" in md, "A: the seeds line")
                check("Bracket of the baseline budgets: [0.5M, 4M]" in md, "A: the bracket line")
                fam = d["families"][0]
                for curve in CURVES:
                    p = law[curve]
                    fa = fam["fits"][curve]["all"]
                    close(fa["alpha"], p["alpha"], 1e-6, f"A: alpha of the {curve} fit of the means")
                    close(fa["E"], mean(list(p["E"].values())), 1e-4, f"A: E of the {curve} fit of the means")
                    for s in seeds:
                        fs = fam["fits"][curve]["seeds"][str(s)]
                        close(fs["E"], p["E"][s], 1e-4, f"A: E of the {curve} fit of seed {s}")
                        close(fs["A"], p["A"][s], 1e-3, f"A: A of the {curve} fit of seed {s}")
                for key, ms in known.items():
                    run_ = f"{key}+tokens={int(N)}"
                    for k, mode in enumerate(("standard", "fused(1)", "fused(2)", "sequential (soft)")):
                        row = row_of(d, run_, mode)
                        if row is None:
                            continue
                        curve = "sequential" if k == 3 else "parallel"
                        p = law[curve]
                        ls = [loss[(key, k, s)] for s in seeds]
                        close(row["excess"], mean(ls) - opt, 1e-9, f"A: {key} {mode}: excess over the optimum")
                        # loss difference to the baseline run at N, paired by seed
                        ds = [loss[(key, k, s)] - L(curve, s, N) for s in seeds]
                        dst = row["loss_difference_stats"]
                        close(dst["mean"], mean(ds), 1e-9, f"A: {key} {mode}: mean loss difference")
                        h = T975[2] * statistics.stdev(ds) / math.sqrt(3)
                        close(dst["ci95"][1] - dst["ci95"][0], 2 * h, 1e-9, f"A: {key} {mode}: loss difference CI width")
                        line = line_of(md, run_, mode)
                        m = ms[k]
                        if m is None:  # below every seed's floor
                            check(row["fit_of_means"]["n_star"] is None and row["multiplier_stats"] is None,
                                  f"A: {key} {mode}: no n* below the floor")
                            check("beyond the fit" in line and "extrapolated" not in line, f"A: {key} {mode}: 'beyond the fit' in {line!r}")
                            continue
                        # fit of the means: n* = (mean A / (mean L - mean E))^(1/alpha)
                        Em, Am = mean(list(p["E"].values())), mean(list(p["A"].values()))
                        nstar = (Am / (mean(ls) - Em)) ** (1 / p["alpha"])
                        close(row["fit_of_means"]["multiplier"], nstar / N, 1e-3, f"A: {key} {mode}: multiplier of the fit of the means")
                        close(row["fit_of_means"]["multiplier_matched_compute"], nstar / (N * mean(list(comp.values()))), 1e-3,
                              f"A: {key} {mode}: matched-compute multiplier of the fit of the means")
                        check(row["fit_of_means"]["extrapolated"] == (not 0.5 <= nstar / N <= 4),
                          f"A: {key} {mode}: flag of the fit of the means")
                        for i, s in enumerate(seeds):
                            e = row["per_seed"][i]
                            close(e["multiplier"], m[i], 1e-3, f"A: {key} {mode}: multiplier of seed {s}")
                            close(e["multiplier_matched_compute"], m[i] / comp[s], 1e-3, f"A: {key} {mode}: matched compute, seed {s}")
                            check(e["extrapolated"] == (not 0.5 <= m[i] <= 4), f"A: {key} {mode}: flag of seed {s}")
                        st = row["multiplier_stats"]
                        close(st["mean"], mean(m), 1e-3, f"A: {key} {mode}: mean multiplier")
                        h = T975[2] * statistics.stdev(m) / math.sqrt(3)
                        close(st["ci95"][0], mean(m) - h, 1e-2, f"A: {key} {mode}: CI lower end")
                        close(st["ci95"][1], mean(m) + h, 1e-2, f"A: {key} {mode}: CI upper end")
                        close(st["min"], min(m), 1e-3, f"A: {key} {mode}: min")
                        close(st["max"], max(m), 1e-3, f"A: {key} {mode}: max")
                        check(st["extrapolated"] == (not 0.5 <= mean(m) <= 4), f"A: {key} {mode}: flag of the mean")
                        mc = mean([m[i] / comp[s] for i, s in enumerate(seeds)]) * mean(list(comp.values()))  # its n* / N
                        check(row["multiplier_matched_compute_stats"]["extrapolated"] == (not 0.5 <= mc <= 4),
                              f"A: {key} {mode}: flag of the mean at matched compute")
                        want_seeds = [str(s) for i, s in enumerate(seeds) if not 0.5 <= m[i] <= 4]
                        check(st["seeds_extrapolated"] == want_seeds, f"A: {key} {mode}: extrapolated seeds {st['seeds_extrapolated']}")
                        if any(not 0.5 <= v <= 4 for v in m) or not 0.5 <= nstar / N <= 4:
                            check("(extrapolated" in line, f"A: {key} {mode}: flagged in the table: {line!r}")
                        elif not st["ci_extrapolated"]:
                            check("extrapolated" not in line and "bracket)" not in line, f"A: {key} {mode}: not flagged: {line!r}")
                # the partly extrapolated mode: mean 3.9x inside, seed 3 (4.3x) outside
                line = line_of(md, f"fuser=glu+pass_mix=2_1+tokens={int(N)}", "sequential (soft)")
                check("(extrapolated: seed 3)" in line, f"A: seed 3 flagged in {line!r}")

            # B. Noisy losses (sd 0.001 on every loss, one seeded stream), baselines at 1, 1.5, 2, 3 x N, no optimal
            # loss; true multipliers 1.5x (standard) and 0.7x (fused(1), below the bracket). Three seeds: the
            # per-seed multipliers near the truth, their interval around it; then seed 1 alone: no interval.
            rng = random.Random(7)
            E, A, alpha = 2.0, 50.0, 0.4
            for seeds_b in ((1, 2, 3), (1,)):
                grid = os.path.join(tmp, f"noisy_{len(seeds_b)}_seeds")
                rng.seed(7)
                for s in (1, 2, 3):
                    for x in (1, 1.5, 2, 3):
                        l1 = E + A * (x * N) ** -alpha + rng.gauss(0, 0.001)
                        if s in seeds_b:
                            _write_run(grid, [("fuser", "none"), ("tokens", str(int(x * N)))], s, x * N, x * N,
                                       {"fuser": "none"}, {"val_loss": [l1], "seq_loss_standard": l1 - 0.2})
                    vals = [E + A * (m * N) ** -alpha + rng.gauss(0, 0.001) for m in (1.5, 0.7)]
                    if s in seeds_b:
                        _write_run(grid, [("fuser", "glu"), ("tokens", str(int(N)))], s, N, 1.25 * N, {"fuser": "glu"},
                                   {"val_loss": vals, "seq_loss_soft": 1.7})
                what = f"B ({len(seeds_b)} seed{'s' if len(seeds_b) > 1 else ''})"
                rc, md, d = run(grid)
                check(rc == 0, f"{what}: exit status {rc}")
                if rc != 0:
                    continue
                check("Optimal loss" not in md and " excess " not in md, f"{what}: no optimum, no excess column")
                run_ = f"fuser=glu+tokens={int(N)}"
                row = row_of(d, run_, "standard")
                if row:
                    st = row["multiplier_stats"]
                    ms = [e["multiplier"] for e in row["per_seed"]]
                    close(row["fit_of_means"]["multiplier"], 1.5, 0.1, f"{what}: multiplier of the fit of the means")
                    for e in row["per_seed"]:
                        close(e["multiplier"], 1.5, 0.1, f"{what}: multiplier of seed {e['seed']}")
                    if len(seeds_b) > 1:
                        h = T975[2] * statistics.stdev(ms) / math.sqrt(3)
                        close(st["ci95"][0], mean(ms) - h, 1e-9, f"{what}: CI lower end")
                        check(st["ci95"][0] < 1.5 < st["ci95"][1], f"{what}: CI {st['ci95']} around 1.5")
                        check("One seed" not in md, f"{what}: no one-seed line")
                    else:
                        check("One seed: no confidence interval is possible" in md, f"{what}: the one-seed line")
                        check(st["ci95"] is None and row["loss_difference_stats"]["ci95"] is None,
                              f"{what}: no CI with one seed")
                        check("1 seed: no CI" in line_of(md, run_, "standard"), f"{what}: 'no CI' in the table")
                row = row_of(d, run_, "fused(1)")
                if row:
                    check(row["fit_of_means"]["extrapolated"] and all(e["extrapolated"] for e in row["per_seed"])
                          and row["multiplier_stats"]["extrapolated"], f"{what}: 0.7x flagged below the bracket")

            # C. Baseline families (preset paper, preset v1 and one without a preset override, different floors), two
            # seeds: each full-bandwidth configuration is compared with its own family (1.4/1.6x against paper,
            # 2.4/2.6x against v1).
            grid = os.path.join(tmp, "families")
            fl = {"paper": 1.4, "v1": 1.2}
            for s in (1, 2):  # baselines without a preset override (preset paper by default, another floor): the
                for x in (1, 2, 4):  # preset=paper configuration must take the more specific family preset=paper
                    _write_run(grid, [("fuser", "none"), ("tokens", str(int(x * N)))], s, x * N, x * N,
                               {"fuser": "none", "preset": "paper"}, {"val_loss": [1.6 + 30 * (x * N) ** -0.3]})
            for pre, E in fl.items():
                for s in (1, 2):
                    for x in (1, 2, 4):
                        n = x * N
                        _write_run(grid, [("preset", pre), ("fuser", "none"), ("tokens", str(int(n)))], s, n, n,
                                   {"fuser": "none", "preset": pre}, {"val_loss": [E + 0.01 * s + 30 * n ** -0.3]})
                    m = {"paper": [1.4, 1.6], "v1": [2.4, 2.6]}[pre][s - 1]
                    _write_run(grid, [("preset", pre), ("fuser", "glu"), ("tokens", str(int(N)))], s, N, 1.3 * N,
                               {"fuser": "glu", "preset": pre}, {"val_loss": [E + 0.01 * s + 30 * (m * N) ** -0.3]})
            rc, md, d = run(grid)
            check(rc == 0, f"C: exit status {rc}")
            if rc == 0:
                check(len(d["families"]) == 3 and "Presets: paper, v1." in md, "C: three families, two presets")
                for pre, want in (("paper", [1.4, 1.6]), ("v1", [2.4, 2.6])):
                    row = row_of(d, f"preset={pre}+fuser=glu+tokens={int(N)}", "standard")
                    if row:
                        check(row["family"] == f"preset={pre}", f"C: {pre} compared with family {row['family']}")
                        st = row["multiplier_stats"]
                        close(st["mean"], mean(want), 1e-3, f"C: {pre}: mean multiplier")
                        h = T975[1] * statistics.stdev(want) / math.sqrt(2)
                        close(st["ci95"][1] - st["mean"], h, 1e-2, f"C: {pre}: CI half-width (df 1)")
                        check(not st["extrapolated"] and not st["seeds_extrapolated"], f"C: {pre}: seeds inside the bracket")
                        # paper: 1.5 +- 1.27 leaves the bracket [1x, 4x] below; v1: 2.5 +- 1.27 does not
                        check(st["ci_extrapolated"] == (mean(want) - h < 1), f"C: {pre}: the df-1 interval and the bracket")

            # D. Baselines at two budgets only: refused with exit status 1.
            grid = os.path.join(tmp, "two_budgets")
            for x in (1, 2):
                _write_run(grid, [("fuser", "none"), ("tokens", str(int(x * N)))], 1, x * N, x * N, {"fuser": "none"},
                           {"val_loss": [2.0 + x * 0.01]})
            rc, _, _ = run(grid)
            check(rc == 1, f"D: two budgets: exit status {rc}, expected 1")

    except Exception as e:  # a crash is a failure too, with where it happened
        fails.append(f"crashed: {e!r}\n{traceback.format_exc()}")

    for f in fails:
        print(f"FAIL: {f}")
    print(f"multiplier.py --self-test: {'FAILED (' + str(len(fails)) + ' checks)' if fails else 'all checks passed'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
