#!/usr/bin/env python3
"""gpu_peer.py: the PyTorch eager peer of benchmarks/gpu_bench.cu, on the same GPU (scripts/gpu-check.sh).

    python3 scripts/gpu_peer.py [--config 100m|small] [--batch B] [--seq T] [--steps N] [--warmup W]
                                [--prompt P] [--decode-steps S] [--measures train,kpass2,decode_standard,decode_soft]

It reuses python/fbt/hf/fbt_torch.py (the independent PyTorch implementation of the fbt model, written for
the CPU): the model is built and initialised on the CPU (its init draws from a CPU generator), moved to the
GPU, and torch's default device is then set to CUDA, so the tensors fbt_torch creates inside kpass and the
decoder (positions, masks, jitter, KV caches) are made on the GPU too. fp32 throughout, TF32 off (the fp32
mode of fbt's GEMMs), eager mode (no torch.compile). AdamW is torch's fused CUDA kernel.

Measures and output keys are gpu_bench's: one JSON line per measure with "impl": "torch-eager", "median_ms",
"min_ms", and "tokens_per_s" (train, kpass2: zero_grad + forward + backward + AdamW, tokens = B*T) or
"ms_per_token" (decode_standard, decode_soft: greedy KV-cached steps after a P-token prefill).
A measure that fails prints {"impl": "torch-eager", "measure": ..., "error": "..."} instead.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "fbt", "hf"))

import torch  # noqa: E402

import fbt_torch as ft  # noqa: E402


def config(name: str, args) -> ft.Config:
    c = ft.Config(vocab_size=257, max_position_embeddings=2048)
    if name == "100m":
        c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.intermediate_size = 768, 12, 12, 12, 2048
        args.batch, args.seq = args.batch or 8, args.seq or 512
    elif name == "small":
        c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.intermediate_size = 256, 4, 4, 4, 768
        args.batch, args.seq = args.batch or 8, args.seq or 128
    else:
        raise SystemExit(f"gpu_peer: unknown --config {name!r} (100m or small)")
    return c


def build(c: ft.Config, fuser: str):
    c = dataclasses.replace(c, fuser=fuser)
    torch.set_default_device("cpu")
    m = ft.FBT(c).init_weights(1).to("cuda")
    torch.set_default_device("cuda")
    return m


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def emit(measure, ms, key, rate, params, args, name):
    print(json.dumps({"impl": "torch-eager", "measure": measure, "config": args.config, "B": args.batch, "T": args.seq,
                      "median_ms": median(ms), "min_ms": min(ms), key: rate, "params": params, "reps": len(ms),
                      "device": name, "torch": torch.__version__}), flush=True)


def bench_train(measure, c, args, name):
    kpass = measure == "kpass2"
    m = build(c, "glu" if kpass else "none")
    opt = ft.make_optimizer(m, lr=1e-4)
    B, T = args.batch, args.seq
    g = torch.Generator(device="cuda").manual_seed(2)
    tokens = torch.randint(0, 256, (B, T), generator=g, device="cuda")
    targets = torch.randint(0, 256, (B, T), generator=g, device="cuda")
    params = sum(p.numel() for p in m.parameters())
    ms = []
    for i in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if kpass:
            obj, _ = m.kpass(tokens, targets, K=2, sigma=0.02, prefix="uniform", doc_start=None)
        else:
            obj, _ = m.kpass(tokens, targets, K=1, doc_start=None)
        obj.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= args.warmup:
            ms.append((time.perf_counter() - t0) * 1000.0)
    emit(measure, ms, "tokens_per_s", B * T / (median(ms) / 1000.0), params, args, name)
    del m, opt
    torch.cuda.empty_cache()


def bench_decode(measure, c, args, name):
    m = build(c, "glu").eval()
    mode = "soft" if measure == "decode_soft" else "standard"
    dec = ft.Decoder(m)
    g = torch.Generator(device="cuda").manual_seed(4)
    prompt = torch.randint(0, 256, (1, args.prompt), generator=g, device="cuda")
    params = sum(p.numel() for p in m.parameters())
    ms = []
    for rep in range(1 + max(1, args.steps // 2)):  # the first repetition warms up
        cache = ft.KVCache(m, 1, args.prompt + args.decode_steps + 1)
        logits = dec.prefill(cache, prompt.clone(), mode)
        tok = int(torch.argmax(logits[0]))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.decode_steps):
            logits = dec.step(cache, torch.tensor([tok], device="cuda"), mode)
            tok = int(torch.argmax(logits[0]))  # synchronises, like fbt's step (logits to the host)
        if rep > 0:
            ms.append((time.perf_counter() - t0) * 1000.0 / args.decode_steps)
    emit(measure, ms, "ms_per_token", median(ms), params, args, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="100m")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode-steps", type=int, default=64)
    ap.add_argument("--measures", default="train,kpass2,decode_standard,decode_soft")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"impl": "torch-eager", "error": "torch.cuda.is_available() is False"}), flush=True)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(0)
    c = config(args.config, args)
    rc = 0
    for measure in [x for x in args.measures.split(",") if x]:
        try:
            if measure in ("train", "kpass2"):
                bench_train(measure, c, args, name)
            elif measure in ("decode_standard", "decode_soft"):
                bench_decode(measure, c, args, name)
            else:
                raise ValueError(f"unknown measure {measure!r}")
        except Exception as e:  # report and go on: the table shows the error
            traceback.print_exc(file=sys.stderr)
            print(json.dumps({"impl": "torch-eager", "measure": measure, "error": f"{type(e).__name__}: {e}"}), flush=True)
            rc = 1
        finally:
            torch.set_default_device("cpu")
    return rc


if __name__ == "__main__":
    sys.exit(main())
