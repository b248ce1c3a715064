#!/usr/bin/env python3
"""The products of a training step by every library of one bench_kernels run, side by side.

    build/benchmarks/bench_kernels --benchmark_filter='BM_Gemm(Eigen|OneDnn|Mkl|Bf16|MklBf16)/' \
        --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
        --benchmark_report_aggregates_only=true --benchmark_format=json > gemm_peers.json
    python3 benchmarks/gemm_peers.py gemm_peers.json [--peak peak.json] > gemm_peers.md

prints one markdown row per product (bench_kernels' names: <cfg>/<product>, sgemm_1024_*, gemm_1024_*) with
the median GFLOP/s of each family that ran it: float by Eigen, by oneDNN (whatever its kernel) and by Intel
MKL (a peer, in a build that found it); bf16 by fbt (gemm_bf16) and by MKL. Ratios are of times (below 1:
the library named first is faster). The last rows sum each config's times. With --peak (bench_kernels' BM_Peak json), each float
rate is also given as a share of the measured FMA peak. Random interleaving runs the families' repetitions
in a shuffled order, so a noisy minute of a shared machine does not land on one library.
"""
import argparse
import collections
import json
import sys

FAMILIES = [("BM_GemmEigen", "Eigen"), ("BM_GemmOneDnn", "oneDNN"), ("BM_GemmMkl", "MKL"),
            ("BM_GemmBf16", "fbt bf16"), ("BM_GemmMklBf16", "MKL bf16")]


def medians(path):
    """{product: {family: (median time, median GFLOP/s)}} from a bench_kernels json."""
    with open(path) as f:
        data = json.load(f)
    rows = collections.defaultdict(dict)
    for b in data.get("benchmarks", []):
        if b.get("aggregate_name", "median") != "median" or b.get("error_occurred"):
            continue
        family, _, product = b.get("run_name", b.get("name", "")).partition("/")
        rows[product][family] = (b["real_time"], b.get("GFLOP/s", 0.0))
    return rows


def peak_gflops(path):
    with open(path) as f:
        data = json.load(f)
    rates = [b["GFLOP/s"] for b in data.get("benchmarks", [])
             if b.get("run_name", b.get("name")) == "BM_Peak/fp32_fma" and "GFLOP/s" in b and b.get("aggregate_name") in (None, "median")]
    if not rates:
        sys.exit(f"gemm_peers.py: no BM_Peak/fp32_fma result in {path}")
    return sorted(rates)[len(rates) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="bench_kernels --benchmark_format=json output")
    ap.add_argument("--peak", help="bench_kernels BM_Peak json: float rates as a share of the FMA peak")
    a = ap.parse_args()
    rows = medians(a.json)
    if not rows:
        sys.exit(f"gemm_peers.py: no median results in {a.json} (run with --benchmark_repetitions >= 2)")
    peak = peak_gflops(a.peak) if a.peak else None
    present = [(f, n) for f, n in FAMILIES if any(f in r for r in rows.values())]

    def rate(r, f):
        if f not in r:
            return "-"
        g = r[f][1]
        return f"{g:.1f}" + (f" ({100 * g / peak:.0f}%)" if peak and "Bf16" not in f else "")

    def ratio(r, num, den):
        return f"{r[num][0] / r[den][0]:.2f}" if num in r and den in r else "-"

    head = ["product"] + [f"{n} GFLOP/s" for _, n in present] + ["MKL / Eigen", "oneDNN / Eigen", "MKL bf16 / fbt bf16"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" + "---:|" * (len(head) - 1))
    totals = collections.defaultdict(float)
    for product in sorted(rows, key=lambda p: ("/" in p, p)):
        r = rows[product]
        if "/" in product:
            for f, _ in present:
                if f in r:
                    totals[(product.split("/")[0], f)] += r[f][0]
        print("| " + " | ".join([product] + [rate(r, f) for f, _ in present] +
                                [ratio(r, "BM_GemmMkl", "BM_GemmEigen"), ratio(r, "BM_GemmOneDnn", "BM_GemmEigen"),
                                 ratio(r, "BM_GemmMklBf16", "BM_GemmBf16")]) + " |")
    for cfg in sorted({c for c, _ in totals}):
        t = {f: (totals[(cfg, f)], 0.0) for f, _ in present if (cfg, f) in totals}
        print("| " + " | ".join([f"**{cfg}: sum of times**"] + [f"{t[f][0] / 1e3:.1f} ms" if f in t else "-" for f, _ in present] +
                                [ratio(t, "BM_GemmMkl", "BM_GemmEigen"), ratio(t, "BM_GemmOneDnn", "BM_GemmEigen"),
                                 ratio(t, "BM_GemmMklBf16", "BM_GemmBf16")]) + " |")


if __name__ == "__main__":
    main()
