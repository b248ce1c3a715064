#!/usr/bin/env python3
"""compare_table.py: the markdown table of compare_builds.sh / regress.sh from their JSON lines (plain Python 3).

    python3 benchmarks/compare_table.py LINES.jsonl [--cpu "CPU: ..."]

Each line is a bench_e2e JSON line with "side" (old or new) and "round" added by compare_builds.sh. Rows
are (config, threads, precision, measure) in the order first seen; a line without "precision" (a
bench_e2e from before --precision) is fp32. With one side (compare_builds.sh BIN -): the median over
rounds of each process's median, with the range over rounds. With two: both, and new/old: the median of
the per-round ratios (each round runs old then new, back to back) with their range; "faster" / "slower"
when there are at least 3 rounds, every round's ratio is below / above 1 and the median ratio is beyond
0.98 / 1.02; "~" otherwise (within the noise of the rounds); "-" with fewer than 3 rounds.
"""
import json
import statistics
import sys


def unit(m):
    return "ms/token" if m.startswith("decode_") else "ms/prefill" if m.startswith("prefill") else "ms (1024^3)" if m == "sgemm" else "ms/step"


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    cpu = None
    if "--cpu" in args:
        i = args.index("--cpu")
        cpu = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    rows = [json.loads(l) for l in open(args[0]) if l.startswith("{")]
    groups = {}
    for r in rows:
        key = (r.get("config"), r.get("threads"), r.get("precision", "fp32"), r["measure"])
        groups.setdefault(key, {}).setdefault(r["side"], {})[r["round"]] = r["median_ms"]
    two = any("new" in g for g in groups.values()) and any("old" in g for g in groups.values())
    f = lambda v: f"{statistics.median(v):.4g} [{min(v):.4g}-{max(v):.4g}]" if v else "-"
    print()
    if cpu:
        print(cpu + "\n")
    if two:
        print("| config | threads | precision | measure | unit | old median [range] | new median [range] | new/old (median of rounds) [range] | |")
        print("|---|---:|---|---|---|---:|---:|---:|---|")
    else:
        print("| config | threads | precision | measure | unit | median [range over rounds] | rounds |")
        print("|---|---:|---|---|---|---:|---:|")
    for (cfg, th, prec, m), g in groups.items():
        o, n = g.get("old", {}), g.get("new", {})
        if not two:
            v = list((o or n).values())
            print(f"| {cfg} | {th} | {prec} | {m} | {unit(m)} | {f(v)} | {len(v)} |")
            continue
        ratios = [n[k] / o[k] for k in o if k in n]
        verdict = "-"
        if len(ratios) >= 3:  # every round agrees and the median moved by more than 2%
            med = statistics.median(ratios)
            verdict = "faster" if max(ratios) < 1 and med < 0.98 else "slower" if min(ratios) > 1 and med > 1.02 else "~"
        rr = f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]" if ratios else "-"
        print(f"| {cfg} | {th} | {prec} | {m} | {unit(m)} | {f(list(o.values()))} | {f(list(n.values()))} | {rr} | {verdict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
