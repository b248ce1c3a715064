#!/usr/bin/env python3
"""gemm_shapes.py: fbt's matrix products against torch's, shape by shape, in fp32 and bf16.

    python3 benchmarks/gemm_shapes.py --bench build/benchmarks/bench_kernels [--threads 1] [--rounds 3]
                                      [--out DIR]

The shapes are those of the tiny and small training steps (bench_kernels' BM_Gemm/<cfg>/<name>: the
projections, the MLP, the LM head, forward and both backward products) and the square 1024^3 one. fbt:
bench_kernels' BM_Gemm (fp32, the CPU backend's product as a step runs it: oneDNN's kernel on an AVX-512
CPU in a build with oneDNN, Eigen's elsewhere; BM_GemmEigen has Eigen's) and BM_GemmBf16 (gemm_bf16: bf16 operands, float sums, float
result; a weight operand read from its bf16 copy, made once per step in training). The shapes come
from bench_kernels' own output (its M, N, K, tA, tB, acc counters), so the two sides time the same products.
torch: torch.mm / addmm_ on the same layouts (a transposed operand is a transposed view), fp32, and bf16
operands with a bf16 result (what autocast's products do), torch.set_num_threads(--threads).

Each round runs fbt then torch, each in a fresh process; per shape the table gives the median over
rounds of each side's time (each the median of 3 repetitions) and the median of the per-round ratios
torch time / fbt time (above 1: fbt is faster). Prints a markdown table (with the CPU line of
benchmarks/cpu_info.py); --out DIR also keeps the raw JSON and the table there.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_fbt(bench, threads):
    """{name: seconds per product} and {name: shape} from one bench_kernels process."""
    cmd = [bench, "--benchmark_filter=^BM_Gemm(Bf16)?/", "--benchmark_format=json", "--benchmark_repetitions=3",
           "--benchmark_report_aggregates_only=true"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    times, shapes = {}, {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        if b.get("error_occurred"):
            continue
        times[name] = b["real_time"] * scale
        if "M" in b:
            shapes[name] = {k: int(b[k]) for k in ("M", "N", "K", "tA", "tB", "acc")}
    return times, shapes


def peer_name(name):
    """The fp32 benchmark of a BM_GemmBf16 shape."""
    return name.replace("BM_GemmBf16/gemm_1024", "BM_Gemm/sgemm_1024").replace("BM_GemmBf16/", "BM_Gemm/")


def torch_worker(shapes, threads):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    res = {}
    for name, s in shapes.items():
        for prec, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            M, N, K = s["M"], s["N"], s["K"]
            A = torch.randn(K, M) if s["tA"] else torch.randn(M, K)
            B = torch.randn(N, K) if s["tB"] else torch.randn(K, N)
            A, B = A.to(dtype), B.to(dtype)
            a = A.t() if s["tA"] else A
            b = B.t() if s["tB"] else B
            C = torch.randn(M, N).to(dtype)

            def once():
                if s["acc"]:
                    C.addmm_(a, b)
                else:
                    torch.mm(a, b, out=C)

            once()
            n, t = 1, 0.0
            while True:  # calls per repetition: at least 0.1 s
                t0 = time.perf_counter()
                for _ in range(n):
                    once()
                t = time.perf_counter() - t0
                if t >= 0.1:
                    break
                n *= 2
            reps = []
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(n):
                    once()
                reps.append((time.perf_counter() - t0) / n)
            res[f"{prec}:{name}"] = statistics.median(reps)
    res["torch"] = torch.__version__
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="build/benchmarks/bench_kernels")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--torch-worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_worker:
        print(json.dumps(torch_worker(json.loads(a.torch_worker), a.threads)))
        return
    if a.threads != 1:
        print("gemm_shapes.py: fbt runs each product on one thread (a step splits its rows across threads); "
              "--threads sets torch's only", file=sys.stderr)
    rounds = []
    for r in range(a.rounds):
        times, shapes = run_fbt(a.bench, a.threads)
        if not shapes:
            sys.exit("gemm_shapes.py: bench_kernels ran no BM_GemmBf16 benchmark (a build without bf16?)")
        peer = subprocess.run([sys.executable, __file__, "--threads", str(a.threads), "--torch-worker", json.dumps(shapes)],
                              check=True, capture_output=True, text=True).stdout
        rounds.append({"fbt": times, "shapes": shapes, "torch": json.loads(peer.strip().splitlines()[-1])})
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    shapes = rounds[0]["shapes"]
    cpu = subprocess.run([sys.executable, os.path.join(HERE, "cpu_info.py"), "--line"], capture_output=True, text=True).stdout.strip()
    lines = [cpu if cpu.startswith("CPU") else f"CPU: {cpu}", "",
             f"fbt: one thread per product; torch {rounds[0]['torch']['torch']}: {a.threads} thread(s). "
             f"{a.rounds} rounds; times are medians over rounds (us), ratios the medians of per-round torch/fbt (above 1: fbt faster).", "",
             "| product | M x N x K | fbt fp32 | torch fp32 | torch/fbt fp32 | fbt bf16 | torch bf16 | torch/fbt bf16 | fbt bf16 GFLOP/s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    med = statistics.median
    for name, s in shapes.items():
        short = name.replace("BM_GemmBf16/", "")
        f32 = [r["fbt"].get(peer_name(name)) for r in rounds]
        b16 = [r["fbt"][name] for r in rounds]
        t32 = [r["torch"][f"fp32:{name}"] for r in rounds]
        t16 = [r["torch"][f"bf16:{name}"] for r in rounds]
        flop = 2.0 * s["M"] * s["N"] * s["K"]
        fp32_cells = ["n/a"] * 3
        if all(x is not None for x in f32):
            fp32_cells = [f"{med(f32) * 1e6:.1f}", f"{med(t32) * 1e6:.1f}", f"{med([t / f for t, f in zip(t32, f32)]):.2f}x"]
        lines.append(f"| {short} | {s['M']} x {s['N']} x {s['K']} | " + " | ".join(fp32_cells) +
                     f" | {med(b16) * 1e6:.1f} | {med(t16) * 1e6:.1f} | {med([t / f for t, f in zip(t16, b16)]):.2f}x | {flop / med(b16) / 1e9:.0f} |")
    table = "\n".join(lines)
    print(table)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "gemm_shapes.json"), "w") as f:
            json.dump(rounds, f, indent=1)
        with open(os.path.join(a.out, "gemm_shapes.md"), "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
