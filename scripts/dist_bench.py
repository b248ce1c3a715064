#!/usr/bin/env python3
"""Data-parallel scaling and overlap on one machine (docs/distributed.md, "Measured").

Runs `fbt train` in several setups, in rounds (each round runs every setup once, in turn, so a noisy
machine slows all of them alike), and prints a Markdown table of the median tokens/s and the median
communication not hidden by the backward (train.jsonl's comm_seconds), steps `--skip`+1 .. `--steps`.

  python3 scripts/dist_bench.py --data CORPUS.txt [--fbt build/tools/fbt] [--rounds 3] [--steps 40]
         [--setups threads1,threads2,ranks2_plain,ranks2_overlap,...] [--model "--hidden_size 256 ..."]

Setups: threads1 / threads2 (one process), ranks2_plain (2 ranks, one reduction after the backward),
ranks2_overlap (2 ranks, buckets of --bucket_mb during the backward), and the same two over TCP on the
loopback (ranks2_tcp_plain, ranks2_tcp_overlap: Open MPI's tcp transport instead of shared memory).
Needs mpirun (Open MPI) for the ranks setups. Standard library only.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2"]


def setups(bucket_mb):
    ov = ["--dist_bucket_mb", str(bucket_mb)]
    return {
        "threads1": ([], ["--threads", "1"]),
        "threads2": ([], ["--threads", "2"]),
        "ranks2_plain": (MPIRUN, ["--distributed", "mpi", "--dist_overlap", "false"]),
        "ranks2_overlap": (MPIRUN, ["--distributed", "mpi", "--dist_overlap", "true"] + ov),
        "ranks2_tcp_plain": (MPIRUN + ["--mca", "btl", "self,tcp"], ["--distributed", "mpi", "--dist_overlap", "false"]),
        "ranks2_tcp_overlap": (MPIRUN + ["--mca", "btl", "self,tcp"], ["--distributed", "mpi", "--dist_overlap", "true"] + ov),
    }


def run(fbt, launcher, extra, args, out_dir):
    cmd = launcher + [fbt, "train", "--data", args.data, "--steps", str(args.steps), "--eval_every", "0", "--eval_windows", "2",
                      "--seq_eval_windows", "0", "--monitor_passes", "0", "--progress", "false", "--out_dir", out_dir]
    cmd += args.model.split() + args.train.split() + extra
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("dist_bench: failed: " + " ".join(cmd) + "\n" + r.stdout[-3000:])
    rows = [json.loads(l) for l in open(os.path.join(out_dir, "train.jsonl"))]
    rows = [x for x in rows if x["step"] >= args.skip]
    tok = statistics.median(x["tok_s"] for x in rows)
    comm = statistics.median(x.get("comm_seconds", 0.0) for x in rows) * 1e3
    step_ms = statistics.median(1e3 * args_tokens(args) / x["tok_s"] for x in rows)
    return tok, comm, step_ms, " ".join(cmd)


def args_tokens(args):
    b = int(_flag(args, "--batch_size", 16))
    t = int(_flag(args, "--seq_len", 128))
    return b * t


def _flag(args, name, default):
    toks = (args.model + " " + args.train).split()
    return toks[toks.index(name) + 1] if name in toks else default


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--fbt", default="build/tools/fbt")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--skip", type=int, default=5, help="steps left out of the medians (warm-up)")
    p.add_argument("--bucket_mb", type=float, default=0.25)
    p.add_argument("--setups", default="threads1,threads2,ranks2_plain,ranks2_overlap")
    p.add_argument("--model", default="", help="model flags, e.g. '--hidden_size 256 --num_hidden_layers 6'")
    p.add_argument("--train", default="--feedback_start 1", help="other training flags (default: single-pass steps)")
    args = p.parse_args()
    if not os.path.exists(args.data):
        sys.exit("dist_bench: no corpus at " + args.data)
    table = setups(args.bucket_mb)
    names = args.setups.split(",")
    for n in names:
        if n not in table:
            sys.exit("dist_bench: unknown setup " + n + " (known: " + ", ".join(table) + ")")
        if table[n][0] and not shutil.which("mpirun"):
            sys.exit("dist_bench: " + n + " needs mpirun (apt-get install openmpi-bin)")
    res = {n: [] for n in names}
    cmds = {}
    tmp = tempfile.mkdtemp(prefix="fbt_dist_bench_")
    try:
        for r in range(args.rounds):
            for n in names:
                launcher, extra = table[n]
                tok, comm, step_ms, cmd = run(args.fbt, launcher, extra, args, os.path.join(tmp, f"{n}_{r}"))
                res[n].append((tok, comm, step_ms))
                cmds[n] = cmd.replace(os.path.join(tmp, f"{n}_{r}"), "OUT")
                print(f"round {r + 1}: {n}: {tok:.0f} tok/s, {step_ms:.1f} ms/step, exposed comm {comm:.2f} ms", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(x[0] for x in res[names[0]])
    print(f"| setup | tokens/s (rounds) | median step (ms) | exposed communication per step (ms, median) | against {names[0]} |")
    print("|---|---|---:|---:|---:|")
    for n in names:
        toks = [x[0] for x in res[n]]
        print(f"| {n} | {', '.join(f'{t:.0f}' for t in toks)} | {statistics.median(x[2] for x in res[n]):.1f} | "
              f"{statistics.median(x[1] for x in res[n]):.2f} | {statistics.median(toks) / base:.2f}x |")
    print()
    for n in names:
        print(f"{n}: {cmds[n]}")


if __name__ == "__main__":
    main()
