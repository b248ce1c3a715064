#!/usr/bin/env python3
"""bench_peer.py: timings of the PyTorch peer, with the measures of fbt's bench_e2e.

    python bench_peer.py --config tiny|small --threads N --measure M [--reps R] [--warmup W]
                         [--init DIR|FILE] [--compile] [--precision fp32|bf16] [--batch B] [--seq T]

Prints ONE JSON line with the keys of bench_e2e's line ("impl" is "torch" or "torch.compile",
"precision" fp32 or bf16, plus "torch": the version, "blas": torch's BLAS_INFO, "env": the fairness
settings in force, "compile_error" when compile fell back).
Run one measure per process (benchmarks/run_e2e.py does), so peak RSS is that measure's own.

Measures (the same work as bench_e2e): train (baseline model, fuser none: forward, backward, AdamW),
fbt_k1 (glu model, K = 1), kpass2, kpass3 (glu, no detach, sigma 0.02, uniform prefix), kpass3_g1
(grad_passes 1), mix (33 steps: 25 x K=1, 7 x K=2, 1 x K=3 in a fixed shuffled order; time per step),
forward (K = 1, no grad), decode_{standard,soft}_{128,1024} (ms per token of 64 KV-cached steps after a
prefill of that many tokens), prefill_fused1 (fused(1) prefill of a 128-token prompt, with a fresh cache),
sgemm (a 1024^3 float product, torch.mm: the BLAS ceiling; with --precision bf16 a torch.mm of bf16
tensors, bf16 result).

--precision bf16: torch.autocast("cpu", dtype=torch.bfloat16) around the forward and the loss of every
measure (training and K-pass steps, forward, prefill, decode steps); backward and AdamW run outside it,
on the fp32 master weights (autocast's usual recipe). With --compile the autocast context is inside the
function handed to torch.compile (fbt_torch.autocast(None) is a disabled context, so fp32 compiles the
same code): dynamo traces it and Inductor compiles the bf16 casts into the forward and backward graphs.
Every training step is zero_grad + forward + backward + AdamW (fused CPU kernel, lr 1e-4, betas 0.9/0.95,
wd 0.1 on matrices), no clipping, as bench_e2e's step.

--init: a checkpoint file, or a directory written by `bench_e2e --save-init DIR` (then
DIR/<config>_none.safetensors for train and DIR/<config>_glu.safetensors otherwise): the peer starts from
fbt's own initial weights. Without it, the peer initialises itself (the spec's init, torch's RNG).

Fair environment: unless --no-fair-env, the script re-executes itself once with OMP_WAIT_POLICY=PASSIVE,
GLIBC_TUNABLES (high malloc mmap and trim thresholds, so glibc does not hand memory back to the kernel
and fault it in again every step) and OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed.
torch.set_num_threads(N), torch.set_num_interop_threads(1).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAIR_SET = {
    "OMP_WAIT_POLICY": "PASSIVE",
    "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967295",
}
FAIR_UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
MEASURES = ("train", "fbt_k1", "kpass2", "kpass3", "kpass3_g1", "mix", "forward", "decode_standard_128",
            "decode_soft_128", "decode_standard_1024", "decode_soft_1024", "prefill_fused1", "sgemm")


def fair_env(env):
    e = dict(env)
    for k in FAIR_UNSET:
        e.pop(k, None)
    e.update(FAIR_SET)
    return e


def quantile(xs, p):
    """Linear interpolation between order statistics (as bench_e2e and numpy's default)."""
    s = sorted(xs)
    x = p * (len(s) - 1)
    i = int(x)
    return s[i] + (x - i) * (s[i + 1] - s[i]) if i + 1 < len(s) else s[i]


def forward_flops_per_token(c, T):
    """bench_e2e's count: 2 x (matrix parameters + head) + causal attention over (T+1)/2 keys."""
    D, QD, KD, Fh = c.hidden_size, c.num_attention_heads * c.hs, c.num_key_value_heads * c.hs, c.intermediate_size
    per_layer = D * QD + 2 * D * KD + QD * D + 3 * D * Fh
    return 2.0 * (c.num_hidden_layers * per_layer + c.vocab_size * D) + c.num_hidden_layers * 4.0 * QD * (T + 1) / 2.0


def blas_info(torch):
    """torch's BLAS_INFO (mkl, open, ...) and whether oneDNN runs bf16 products here."""
    import re
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    info = m.group(1) if m else "?"
    try:
        bf16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()
    except Exception:  # noqa: BLE001
        bf16 = None
    return f"{info}; mkldnn bf16 {'yes' if bf16 else 'no' if bf16 is not None else '?'}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="tiny", choices=("tiny", "small"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--measure", default="train", choices=MEASURES)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--init", default=None, help="fbt checkpoint file or `bench_e2e --save-init` directory")
    ap.add_argument("--compile", action="store_true", help="torch.compile the step (training/forward) or decode step")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                    help="bf16: torch.autocast(cpu, bfloat16) around forward and loss; sgemm: bf16 operands")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-fair-env", action="store_true", help="do not re-execute with the fair environment")
    a = ap.parse_args(argv)

    if not a.no_fair_env and os.environ.get("FBT_PEER_FAIR_ENV") != "1":
        env = fair_env(os.environ)
        env["FBT_PEER_FAIR_ENV"] = "1"
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + (argv if argv is not None else sys.argv[1:]), env)

    try:
        import torch
    except ImportError:
        print(json.dumps({"impl": "torch", "error": "torch is not importable in " + sys.executable}))
        return 2
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "fbt", "hf"))  # fbt_torch.py, the one PyTorch implementation
    import fbt_torch as ft

    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    amp = ft.PRECISIONS[a.precision]  # None (fp32) or torch.bfloat16
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    cfg_name = a.config
    m_train = a.measure == "train"
    fuser = "none" if m_train else "glu"
    cfg, T, B = ft.bench_config(cfg_name, fuser)
    cfg.max_position_embeddings = 2048
    T = a.seq or T
    B = a.batch or B

    # ---- the model: fbt's initial weights when given
    if a.init:
        path = a.init
        if os.path.isdir(path):
            path = os.path.join(path, f"{cfg_name}_{fuser}.safetensors")
        model = ft.load_checkpoint(path)
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size", "fuser"):
            if getattr(model.cfg, k) != getattr(cfg, k):
                raise SystemExit(f"bench_peer: {path}: {k} = {getattr(model.cfg, k)}, expected {getattr(cfg, k)} for {cfg_name}")
        cfg = model.cfg
        init = path
    else:
        model = ft.FBT(cfg).init_weights(a.seed)
        init = "torch"
    model.train()

    compile_error = None
    impl = "torch.compile" if a.compile else "torch"
    fwd = forward_flops_per_token(cfg, T)
    tokens_per_rep, flops_per_token = float(B * T), 3 * fwd
    tok = torch.randint(0, 256, (B, T), generator=gen)
    tgt = torch.randint(0, 256, (B, T), generator=gen)
    times = []

    def timed(fn, warmup, reps):
        for _ in range(warmup):
            fn()
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    if a.measure == "sgemm":  # the ceiling: a 1024^3 float product (torch.mm: MKL here); bf16: bf16 operands and result
        n, dt = 1024, amp or torch.float32
        A, Bm = torch.randn(n, n, generator=gen).to(dt), torch.randn(n, n, generator=gen).to(dt)
        C = torch.empty(n, n, dtype=dt)
        times = timed(lambda: torch.mm(A, Bm, out=C), a.warmup, a.reps)
        tokens_per_rep, flops_per_token = 1.0, 2.0 * n ** 3
        impl = "torch"
    elif a.measure.startswith("decode_") or a.measure == "prefill_fused1":
        model.eval()
        dec = ft.Decoder(model, amp=amp)
        if a.compile:
            # compile now (a prefill and three steps in the measure's mode, outside the timing); on any
            # failure fall back to eager and record why
            mode0 = "fused(1)" if a.measure == "prefill_fused1" else "soft" if "soft" in a.measure else "standard"
            try:
                dec.compile()
                trial = ft.KVCache(model, 1, 160)
                dec.prefill(trial, tok[:1, :128], mode0)
                for i in range(3):
                    dec.step(trial, tok[0, i:i + 1], mode0)
            except Exception as e:  # noqa: BLE001
                compile_error = f"{type(e).__name__}: {e}"[:500]
                impl = "torch"
                dec = ft.Decoder(model, amp=amp)
        if a.measure == "prefill_fused1":
            P = 128
            prompt = tok[:1, :P]

            def prefill():
                cache = ft.KVCache(model, 1, P)
                dec.prefill(cache, prompt, "fused(1)")

            times = timed(prefill, a.warmup, a.reps)
            tokens_per_rep, flops_per_token = float(P), 2 * forward_flops_per_token(cfg, P)
        else:
            mode = "soft" if "soft" in a.measure else "standard"
            ctx, steps = int(a.measure.rsplit("_", 1)[1]), 64
            prompt = torch.randint(0, 256, (1, ctx), generator=gen)
            for rep in range(a.warmup + a.reps):
                cache = ft.KVCache(model, 1, ctx + steps)
                logits = dec.prefill(cache, prompt, mode)
                t0 = time.perf_counter()
                for _ in range(steps):
                    nxt = int(torch.argmax(logits[0]))
                    if nxt == ft.SEP:
                        nxt = 32
                    logits = dec.step(cache, torch.tensor([nxt]), mode)
                if rep >= a.warmup:
                    times.append((time.perf_counter() - t0) * 1e3 / steps)
            tokens_per_rep, flops_per_token = 1.0, forward_flops_per_token(cfg, 2 * (ctx + steps // 2) - 1)
    else:
        opt = ft.make_optimizer(model, lr=1e-4)
        sigma = 0.02
        D = cfg.hidden_size

        def loss_fn(tok, tgt, K, g, noise, prefix):
            with ft.autocast(amp):  # bf16: the forward and the loss; the caller's backward runs outside it
                return model.kpass(tok, tgt, K=K, lam=1.0, prefix=prefix, grad_passes=g, noise=noise, doc_start=None)[0]

        run = loss_fn
        if a.compile:
            try:
                import torch._dynamo
                torch._dynamo.config.cache_size_limit = 64
                # dynamic=False: K, g stay Python constants (one graph per K; mix uses three)
                run = torch.compile(loss_fn, dynamic=False)  # compiled at its first call (see guarded)
            except Exception as e:  # noqa: BLE001
                compile_error = f"{type(e).__name__}: {e}"[:500]
                run, impl = loss_fn, "torch"

        def step(K, g=0, backward=True):
            noise = [None] + [torch.rand(B, T, D, generator=gen) * (2 * sigma) - sigma for _ in range(K - 1)] if K > 1 else None
            prefix = torch.randint(0, T, (K, B), generator=gen) if K > 1 else None
            if not backward:
                with torch.inference_mode():
                    run(tok, tgt, K, g, noise, prefix)
                return
            opt.zero_grad(set_to_none=True)
            loss = run(tok, tgt, K, g, noise, prefix)
            loss.backward()
            opt.step()

        def guarded(fn):
            """First call under torch.compile: on failure fall back to eager and record why."""
            nonlocal run, impl, compile_error
            if run is loss_fn:
                return
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                compile_error = f"{type(e).__name__}: {e}"[:500]
                run, impl = loss_fn, "torch"

        meas = a.measure
        if meas in ("train", "fbt_k1"):
            guarded(lambda: step(1))
            times = timed(lambda: step(1), a.warmup, a.reps)
        elif meas in ("kpass2", "kpass3"):
            K = int(meas[-1])
            guarded(lambda: step(K))
            times = timed(lambda: step(K), a.warmup, a.reps)
            flops_per_token *= K
        elif meas == "kpass3_g1":
            guarded(lambda: step(3, 1))
            times = timed(lambda: step(3, 1), a.warmup, a.reps)
            flops_per_token = 2 * fwd + 3 * fwd
        elif meas == "forward":
            guarded(lambda: step(1, backward=False))
            times = timed(lambda: step(1, backward=False), a.warmup, a.reps)
            flops_per_token = fwd
        elif meas == "mix":
            ks = [1] * 25 + [2] * 7 + [3]
            random.Random(3).shuffle(ks)
            for k in (1, 2, 3):
                guarded(lambda: step(k))

            def cycle():
                for k in ks:
                    step(k)

            times = [t / len(ks) for t in timed(cycle, min(a.warmup, 1), a.reps)]
            flops_per_token *= (25 + 7 * 2 + 3) / 33.0

    med = quantile(times, 0.5)
    tps = tokens_per_rep / (med / 1e3)
    out = {
        "impl": impl, "precision": a.precision, "config": cfg_name, "threads": a.threads, "measure": a.measure, "B": B, "T": T, "reps": len(times),
        "median_ms": med, "p25_ms": quantile(times, 0.25), "p75_ms": quantile(times, 0.75),
        "min_ms": min(times), "max_ms": max(times), "tokens_per_s": tps, "flops_per_token": flops_per_token,
        "gflops": flops_per_token * tps / 1e9,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "torch": torch.__version__, "blas": blas_info(torch), "init": init,
        "env": {k: os.environ.get(k) for k in list(FAIR_SET) + list(FAIR_UNSET)},
    }
    if compile_error:
        out["compile_error"] = compile_error
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
