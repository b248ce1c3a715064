#!/usr/bin/env python3
"""probe_table.py: the App. F tables with seeds (docs/EXPERIMENTS.md section 14; issue 48) from `fbt probe --out` files.

    python3 scripts/probe_table.py FILE.probe.json ... [--depths 0,1] [--json OUT]
    python3 scripts/probe_table.py --self-test

Files are grouped into models by name: `<model>_s<seed>.probe.json` is seed <seed> of <model> (a name without
`_s<digits>` is seed 1), and `_W<k>` in a name is a latest-write overwrite count (W = k). Per model it prints one
markdown row per prefill and setting (N = ... , or "all" pooled) and one column per probe depth: the accuracy in %
as the mean over seeds with its 95% Student t interval over seeds, or, for one seed, the Wilson interval over
items that `fbt probe` wrote.

The trend test (the paper's Fig. 7b, "full recurrence better as overwrites increase"): for every model family with
files at several W, the per-seed gains recurrent - standard, recurrent - fused(1) and fused(1) - standard at each
depth of --depths, and the least-squares slope of each gain against log2(W) (points per doubling of the writes);
with several seeds the slope's mean and 95% t interval over seeds, with one seed a normal interval from the
cells' binomial variances (items taken as independent: the same items under two prefills would make the paired
interval narrower, so this one is conservative). A positive slope of recurrent - fused(1) is the paper's trend.
"""
import json
import math
import os
import re
import sys
import tempfile

from tinterval import mean_ci  # scripts/tinterval.py


def model_key(path):
    """(model, seed, W) from a file name: 'dm_glu_s2.probe.json' -> ('dm_glu', 2, None)."""
    base = os.path.basename(path)
    base = base[: -len(".probe.json")] if base.endswith(".probe.json") else os.path.splitext(base)[0]
    seed, W = 1, None
    m = re.search(r"_s(\d+)(?=_|$)", base)
    if m:
        seed = int(m.group(1))
        base = base[: m.start()] + base[m.end():]
    m = re.search(r"_W(\d+)(?=_|$)", base)
    if m:
        W = int(m.group(1))
    return base, seed, W


def load_cells(path):
    with open(path) as fh:
        d = json.load(fh)
    out = {}
    for c in d["cells"]:
        out[(c["mode"], c.get("setting") or "all", int(c["depth"]))] = c
    return out, d.get("depths", 0)


def depth_name(d, depths):
    return "final" if d == depths - 1 else "depth %d" % d


def setting_order(s):
    if s == "all":
        return (1, 0, s)
    m = re.match(r"[A-Za-z]+=(\d+)$", s)
    return (0, int(m.group(1)) if m else 0, s)


def tables(files):
    models = {}
    for f in files:
        key, seed, _ = model_key(f)
        cells, depths = load_cells(f)
        models.setdefault(key, {"seeds": {}, "depths": depths})["seeds"][seed] = cells
    out = {}
    for key, m in sorted(models.items()):
        seeds = sorted(m["seeds"])
        rows = {}
        common = set.intersection(*(set(m["seeds"][s]) for s in seeds))
        for (mode, setting, depth) in common:
            accs = [m["seeds"][s][(mode, setting, depth)]["accuracy"] for s in seeds]
            mean, half = mean_ci(accs)
            if half is None:
                lo, hi = m["seeds"][seeds[0]][(mode, setting, depth)]["ci95"]
                cell = {"mean": mean, "ci95": [lo, hi], "interval": "items (Wilson)"}
            else:
                cell = {"mean": mean, "ci95": [mean - half, mean + half], "interval": "seeds (t)"}
            cell["seeds"] = accs
            cell["n"] = m["seeds"][seeds[0]][(mode, setting, depth)]["n"]
            rows.setdefault((mode, setting), {})[depth] = cell
        out[key] = {"seeds": seeds, "depths": m["depths"], "rows": rows}
    return out


def slope(ws, ys):
    xs = [math.log2(w) for w in ws]
    mx = sum(xs) / len(xs)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * y for x, y in zip(xs, ys)) / sxx, [(x - mx) / sxx for x in xs]


def trend(files, depths_of_interest):
    """Per family (a model name without its _W part) with >= 2 W: slopes of the prefill gains against log2 W."""
    fam = {}
    for f in files:
        key, seed, W = model_key(f)
        if W is None:
            continue
        family = re.sub(r"_W\d+", "", key)
        cells, _ = load_cells(f)
        fam.setdefault(family, {}).setdefault(seed, {})[W] = cells
    out = {}
    pairs = (("recurrent", "standard"), ("recurrent", "fused(1)"), ("fused(1)", "standard"))
    for family, by_seed in sorted(fam.items()):
        seeds = sorted(s for s in by_seed if len(by_seed[s]) >= 2)
        if not seeds:
            continue
        Ws = sorted(set.intersection(*(set(by_seed[s]) for s in seeds)))
        if len(Ws) < 2:
            continue
        res = []
        for d in depths_of_interest:
            for a, b in pairs:
                per_seed, var1 = [], None
                gains_by_seed = []
                ok = True
                for s in seeds:
                    gains, var = [], []
                    for W in Ws:
                        ca, cb = by_seed[s][W].get((a, "all", d)), by_seed[s][W].get((b, "all", d))
                        if ca is None or cb is None:
                            ok = False
                            break
                        gains.append(ca["accuracy"] - cb["accuracy"])
                        var.append(ca["accuracy"] * (1 - ca["accuracy"]) / ca["n"] + cb["accuracy"] * (1 - cb["accuracy"]) / cb["n"])
                    if not ok:
                        break
                    k, w = slope(Ws, gains)
                    per_seed.append(k)
                    gains_by_seed.append(gains)
                    var1 = sum(wi * wi * v for wi, v in zip(w, var))
                if not ok:
                    continue
                mean, half = mean_ci(per_seed)
                if half is None:
                    half, how = 1.96 * math.sqrt(var1), "items (binomial, unpaired)"
                else:
                    how = "seeds (t)"
                mean_gains = [sum(g[i] for g in gains_by_seed) / len(gains_by_seed) for i in range(len(Ws))]
                res.append({"depth": d, "gain": a + " - " + b, "W": Ws, "gains": mean_gains, "slope": mean,
                            "ci95": [mean - half, mean + half], "interval": how, "seeds": seeds, "slope_per_seed": per_seed})
        out[family] = res
    return out


def pct(x):
    return "%.1f" % (100 * x)


def print_tables(t):
    for key, m in t.items():
        depths = m["depths"]
        print("\n**%s** (seeds %s; %% with its 95%% interval: %s)\n" % (key, ", ".join(map(str, m["seeds"])),
              "over seeds" if len(m["seeds"]) > 1 else "over items"))
        print("| prefill | setting | " + " | ".join(depth_name(d, depths) for d in range(depths)) + " |")
        print("|---|---|" + "---:|" * depths)
        for (mode, setting) in sorted(m["rows"], key=lambda ms: (ms[0] != "standard", ms[0], setting_order(ms[1]))):
            r = m["rows"][(mode, setting)]
            cells = []
            for d in range(depths):
                c = r.get(d)
                cells.append("-" if c is None else "%s [%s, %s]" % (pct(c["mean"]), pct(max(0, c["ci95"][0])), pct(min(1, c["ci95"][1]))))
            print("| %s | %s | %s |" % (mode, setting, " | ".join(cells)))


def print_trend(tr):
    for family, res in tr.items():
        if not res:
            continue
        print("\n**Trend over overwrites, %s** (W = %s; slope in points per doubling of W, 95%% interval over %s)\n"
              % (family, ", ".join(map(str, res[0]["W"])), res[0]["interval"]))
        print("| depth | gain | gain at each W (points) | slope per doubling [95% CI] |")
        print("|---|---|---|---|")
        for r in res:
            print("| %d | %s | %s | %+.1f [%+.1f, %+.1f] |" % (r["depth"], r["gain"], " / ".join("%+.1f" % (100 * g) for g in r["gains"]),
                                                          100 * r["slope"], 100 * r["ci95"][0], 100 * r["ci95"][1]))


def main(argv):
    if len(argv) >= 2 and argv[1] == "--self-test":
        return self_test()
    files, json_out, depths = [], None, [0, 1]
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--json" and i + 1 < len(argv):
            json_out = argv[i + 1]; i += 2
        elif a == "--depths" and i + 1 < len(argv):
            depths = [int(x) for x in argv[i + 1].split(",") if x]; i += 2
        elif a.startswith("-"):
            print("probe_table.py: unknown argument %r" % a, file=sys.stderr)
            return 2
        else:
            files.append(a); i += 1
    if not files:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    t = tables(files)
    print_tables(t)
    tr = trend(files, depths)
    print_trend(tr)
    if json_out:
        with open(json_out, "w") as fh:
            json.dump({"models": {k: {"seeds": v["seeds"], "rows": [{"mode": ms[0], "setting": ms[1], "depths": {str(d): c for d, c in r.items()}}
                                                                 for ms, r in v["rows"].items()]} for k, v in t.items()},
                       "trend": tr}, fh, indent=1)
    return 0


def self_test():
    assert model_key("runs/x/dm_glu_s2.probe.json") == ("dm_glu", 2, None)
    assert model_key("lw_mix_W4_s3.probe.json") == ("lw_mix_W4", 3, 4)
    assert model_key("completion_glu.probe.json") == ("completion_glu", 1, None)
    with tempfile.TemporaryDirectory() as t:
        def write(name, accs):  # accs: {(mode, depth): accuracy}, 100 items each, pooled setting only
            cells = [{"mode": m, "setting": "", "depth": d, "accuracy": a, "n": 100, "correct": int(a * 100), "ci95": [a - 0.1, a + 0.1]}
                     for (m, d), a in accs.items()]
            with open(os.path.join(t, name), "w") as fh:
                json.dump({"cells": cells, "depths": 2}, fh)
            return os.path.join(t, name)
        files = []
        for s, off in ((1, 0.0), (2, 0.02), (3, -0.02)):
            for W, rec in ((2, 0.6), (4, 0.7), (8, 0.8)):  # recurrent - standard grows by 10 points per doubling
                files.append(write("lw_W%d_s%d.probe.json" % (W, s), {("standard", 0): 0.5, ("recurrent", 0): rec + off * math.log2(W), ("fused(1)", 0): 0.55,
                                                                      ("standard", 1): 0.6, ("recurrent", 1): 0.6, ("fused(1)", 1): 0.6}))
        tb = tables(files)
        c = tb["lw_W4"]["rows"][("recurrent", "all")][0]
        assert abs(c["mean"] - 0.7) < 1e-12 and c["interval"] == "seeds (t)", c
        assert abs(c["ci95"][1] - 0.7 - 4.303 * 0.04 / math.sqrt(3)) < 1e-9, c  # seeds 0.7, 0.74, 0.66: sd 0.04
        tr = trend(files, [0, 1])["lw"]
        r = [x for x in tr if x["depth"] == 0 and x["gain"] == "recurrent - standard"][0]
        assert abs(r["slope"] - 0.1) < 1e-9 and r["ci95"][0] < 0.1 < r["ci95"][1] and r["W"] == [2, 4, 8], r
        r = [x for x in tr if x["depth"] == 1 and x["gain"] == "recurrent - fused(1)"][0]
        assert abs(r["slope"]) < 1e-12, r
        one = trend([f for f in files if f.endswith("_s1.probe.json")], [0])["lw"][0]  # one seed: the binomial interval
        assert one["interval"].startswith("items") and one["ci95"][0] < one["slope"] < one["ci95"][1], one
        single = tables([files[0]])["lw_W2"]["rows"][("standard", "all")][0]
        assert single["interval"] == "items (Wilson)" and single["ci95"] == [0.4, 0.6], single
    print("probe_table.py self-test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
