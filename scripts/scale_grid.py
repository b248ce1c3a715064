#!/usr/bin/env python3
"""scale_grid.py: the `fbt ablate` grid files of the scale ladder (docs/EXPERIMENTS.md, "Scale"; issue 48).

    python3 scripts/scale_grid.py OUT_DIR [--rungs r0,r1,...] (default r0..r3) [--seeds 1,2,3] [--token-scale X] [--list]
    python3 scripts/scale_grid.py --bench-args RUNG      (the rung's shape as bench_e2e flags)
    python3 scripts/scale_grid.py --self-test

One grid per rung, OUT_DIR/<rung>.json, each a token-multiplier grid on the Python-stdlib corpus
(scripts/make_corpus.py): the full-bandwidth model (the paper preset, fuser glu) at N tokens and the baseline
(fuser none, the same preset otherwise) at N, 1.5 N and 2 N, every run with each seed; `fbt ablate --grid
OUT_DIR/<rung>.json --data CORPUS/train.bin --val_data CORPUS/val.bin --token_dtype uint16 --doc_sep_id 256`
trains it (resumable) and scripts/multiplier.py reads its out_dir. N is TOKENS_PER_PARAM (10) times the
rung's parameter count, rounded to whole steps of 16 x 128 tokens, times --token-scale (a smoke run:
0.01). --list prints the rungs: sizes, parameters, N, and the estimated CPU-hours of each grid on a 2-core
machine (from the measured rate of docs/PERFORMANCE.md, about 7.8e9 parameter-tokens per core-second, the
full-bandwidth run's compute taken as 1.3 N).

The rungs (vocabulary 257, tied embeddings; parameters as ModelConfig::parameter_count counts the baseline) are
RUNGS below; --list prints them.
"""
import json
import os
import sys
import tempfile

VOCAB = 257
BATCH, SEQ = 16, 128
TOKENS_PER_PARAM = 10
PARAM_TOKENS_PER_CORE_SECOND = 7.8e9  # docs/PERFORMANCE.md: the default model's training rate on one core (Zen 4)
FBT_COMPUTE = 1.3                     # the paper schedule's mean passes over a run (feedback from half-way, 75/22/3)

# name: (hidden_size, layers, heads, kv_heads, intermediate_size)
# r0..r3 (0.12M to 0.89M parameters, about 7 CPU-hours with 3 seeds) are the ladder a 2-core machine runs;
# r4 and r5 (2.3M and 4.8M: 32 and 142 CPU-hours) are the rungs for a bigger machine or a cluster
# (scripts/experiments.sh scale with FBT_SCALE_RUNGS and FBT_RANKS).
RUNGS = {
    "r0": (64, 2, 2, 2, 192),
    "r1": (80, 3, 2, 2, 240),
    "r2": (112, 3, 4, 2, 336),
    "r3": (128, 4, 4, 4, 384),
    "r4": (192, 5, 6, 3, 576),
    "r5": (256, 6, 8, 4, 768),
}
LOCAL_RUNGS = ["r0", "r1", "r2", "r3"]


def params(rung, fuser="none"):
    """ModelConfig::parameter_count of the paper preset's model (sandwich norms, QK-norm, head_dim D/heads)."""
    D, L, H, KV, F = RUNGS[rung]
    hd = D // H
    n = VOCAB * D + D
    n += L * (2 * H * hd * D + 2 * KV * hd * D + 2 * hd + 2 * D + 3 * F * D + 2 * D)
    if fuser == "glu":
        n += D + 2 * D * D  # in_norm, w_u, w_g (the gate norm is N_in's gain in the paper preset)
    return n


def budget(rung, scale=1.0):
    """N: TOKENS_PER_PARAM x parameters, in whole steps of BATCH x SEQ (at least 4 steps), times scale."""
    step = BATCH * SEQ
    return max(4, round(TOKENS_PER_PARAM * params(rung) * scale / step)) * step


def cpu_hours(rung, seeds=3):
    n = budget(rung)
    units = seeds * (FBT_COMPUTE + 1.0 + 1.5 + 2.0)
    return units * n * params(rung) / PARAM_TOKENS_PER_CORE_SECOND / 3600


def grid(rung, seeds, scale=1.0):
    D, L, H, KV, F = RUNGS[rung]
    n = budget(rung, scale)
    steps = n // (BATCH * SEQ)
    base = {"preset": "paper", "hidden_size": D, "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
            "intermediate_size": F, "batch_size": BATCH, "seq_len": SEQ, "warmup_steps": max(1, min(200, steps // 10)),
            "eval_windows": 64, "seq_eval_windows": 4, "monitor_passes": 0}
    return {
        "comment": "Scale ladder rung %s (docs/EXPERIMENTS.md, Scale): D %d, %d layers, %d/%d heads, MLP %d, %d parameters (baseline); "
                   "N = %d tokens; the full-bandwidth model (paper preset) at N, the baseline at N, 1.5 N, 2 N. Written by "
                   "scripts/scale_grid.py; data: fbt ablate --grid THIS --data CORPUS/train.bin --val_data CORPUS/val.bin "
                   "--token_dtype uint16 --doc_sep_id 256." % (rung, D, L, H, KV, F, params(rung), n),
        "base": base,
        "runs": [{"fuser": "glu", "tokens": n}, {"fuser": "none", "tokens": n},
                 {"fuser": "none", "tokens": int(round(1.5 * n / (BATCH * SEQ))) * BATCH * SEQ}, {"fuser": "none", "tokens": 2 * n}],
        "seeds": seeds,
        "evals": 4,
        "task_examples": 0,
        "decode_timing": 0,
    }


def bench_args(rung):
    """The rung's model shape as bench_e2e flags."""
    D, L, H, KV, F = RUNGS[rung]
    return ["--hidden_size", str(D), "--num_hidden_layers", str(L), "--num_attention_heads", str(H),
            "--num_key_value_heads", str(KV), "--intermediate_size", str(F)]


def self_test():
    assert params("r3") == 128 * 257 + 128 + 4 * (2 * 4 * 32 * 128 * 2 + 2 * 32 + 2 * 128 + 3 * 384 * 128 + 2 * 128), params("r3")
    assert budget("r0") % (BATCH * SEQ) == 0 and budget("r0", 0.001) == 4 * BATCH * SEQ
    g = grid("r1", [1, 2], 0.5)
    assert g["seeds"] == [1, 2] and [r["fuser"] for r in g["runs"]] == ["glu", "none", "none", "none"]
    assert g["runs"][3]["tokens"] == 2 * g["runs"][0]["tokens"]
    with tempfile.TemporaryDirectory() as t:
        assert main(["scale_grid.py", t, "--rungs", "r0", "--seeds", "1", "--token-scale", "0.01"]) == 0
        with open(os.path.join(t, "r0.json")) as fh:
            assert json.load(fh)["runs"][0]["tokens"] == budget("r0", 0.01)
    assert bench_args("r2") == ["--hidden_size", "112", "--num_hidden_layers", "3", "--num_attention_heads", "4",
                                "--num_key_value_heads", "2", "--intermediate_size", "336"], bench_args("r2")
    print("scale_grid.py self-test: ok")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) == 3 and argv[1] == "--bench-args":  # the rung's shape as bench_e2e flags (its soft-decoding overhead)
        if argv[2] not in RUNGS:
            print("scale_grid.py: unknown rung %r (known: %s)" % (argv[2], ", ".join(RUNGS)), file=sys.stderr)
            return 2
        print(" ".join(bench_args(argv[2])))
        return 0
    if len(argv) < 2 or argv[1].startswith("-") and argv[1] != "--list":
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rungs, seeds, scale, listing, out = list(LOCAL_RUNGS), [1, 2, 3], 1.0, False, None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--rungs" and i + 1 < len(argv):
            rungs = [r for r in argv[i + 1].split(",") if r]; i += 2
        elif a == "--seeds" and i + 1 < len(argv):
            seeds = [int(s) for s in argv[i + 1].split(",") if s]; i += 2
        elif a == "--token-scale" and i + 1 < len(argv):
            scale = float(argv[i + 1]); i += 2
        elif a == "--list":
            listing = True; i += 1
        elif not a.startswith("-") and out is None:
            out = a; i += 1
        else:
            print("scale_grid.py: unknown argument %r" % a, file=sys.stderr)
            return 2
    for r in rungs:
        if r not in RUNGS:
            print("scale_grid.py: unknown rung %r (known: %s)" % (r, ", ".join(RUNGS)), file=sys.stderr)
            return 2
    if not seeds or not (scale > 0):
        print("scale_grid.py: give at least one seed and a token scale > 0", file=sys.stderr)
        return 2
    if listing:
        print("| rung | D | layers | heads/kv | MLP | parameters | N tokens | CPU-hours (%d seeds) |" % len(seeds))
        print("|---|---|---|---|---|---|---|---|")
        for r in rungs:
            D, L, H, KV, F = RUNGS[r]
            print("| %s | %d | %d | %d/%d | %d | %d | %d | %.1f |" % (r, D, L, H, KV, F, params(r), budget(r, scale), cpu_hours(r, len(seeds)) * scale))
    if out:
        os.makedirs(out, exist_ok=True)
        for r in rungs:
            with open(os.path.join(out, r + ".json"), "w") as fh:
                json.dump(grid(r, seeds, scale), fh, indent=2)
                fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
