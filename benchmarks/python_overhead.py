#!/usr/bin/env python3
"""python_overhead.py: what calling fbt from Python costs over calling the C++ directly.

    PYTHONPATH=build/python python3 benchmarks/python_overhead.py [--repeats 21] [--json out.json]

Two comparisons on one model (fbt.Model(config, seed=1); default D 256, 4 layers, byte vocabulary), each
side timed in turn (A B B A ...: drift and noise hit both alike), medians and spread (min, max) reported, and
the overhead as the median of each round's ratio of the two sides:

  decode  the C++ decoder's ms/token (fbt._fbt._timing.generate: decode/decoder.hpp's generate, the code
          `fbt sample` runs, timed in C++) against a Python loop of 128 tokens: one dec.generate call
          with max_new_tokens=1, then 127 calls generate(resume=True, max_new_tokens=1), each feeding the
          last token back through the kept KV cache (the interactive use); and against one
          dec.generate(max_new_tokens=128) call. Greedy; the tokens are checked to be the same.
  step    fbt.multipass_step(model, tokens, K=3) timed with time.perf_counter around the Python call against
          the same step timed inside C++ (fbt._fbt._timing.multipass_step: the same workspace and code).

Targets (the issue's proof): the decode loop within 5% of the C++ ms/token, the step within 2%.
Exit status 0 when both hold, 1 otherwise. Run it on a quiet machine (docs/PERFORMANCE.md, "Python overhead").
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

import fbt

timing = fbt._fbt._timing


def spread(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden_size", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--mode", default="soft")
    ap.add_argument("--tokens", type=int, default=128, help="new tokens per generation")
    ap.add_argument("--batch", type=int, default=4, help="step: B")
    ap.add_argument("--seq", type=int, default=64, help="step: T")
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    D = a.hidden_size
    cfg = dict(vocab_size=257, hidden_size=D, num_hidden_layers=a.layers, num_attention_heads=max(1, D // 64),
               num_key_value_heads=max(1, D // 128), intermediate_size=4 * D, max_position_embeddings=512, fuser="glu")
    model = fbt.Model(cfg, seed=1)
    prompt = np.frombuffer(b"\x00the running sum of 3 1 4 1 5 9 2 6 is ", dtype=np.uint8).astype(np.int32)
    prompt[0] = 256  # the document separator first, as the byte tokenizer reads a document
    n = a.tokens
    dec = fbt.Decoder(model)

    def py_loop():
        t0 = time.perf_counter()
        out = [int(dec.generate(prompt, mode=a.mode, max_new_tokens=1, greedy=True, context=len(prompt) + n)[0])]
        for _ in range(n - 1):
            out.append(int(dec.generate(None, max_new_tokens=1, greedy=True, resume=True)[0]))
        return time.perf_counter() - t0, out

    def py_call():
        t0 = time.perf_counter()
        out = dec.generate(prompt, mode=a.mode, max_new_tokens=n, greedy=True)
        return time.perf_counter() - t0, [int(x) for x in out]

    def cpp():
        s, out = timing.generate(model, prompt, a.mode, n, 1)
        return s[0], list(out)

    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 256, size=(a.batch, a.seq), dtype=np.int32)

    def py_step():
        t0 = time.perf_counter()
        loss = fbt.multipass_step(model, tokens, K=a.K)
        return time.perf_counter() - t0, loss

    def cpp_step():
        s, loss = timing.multipass_step(model, tokens, a.K, 1)
        return s[0], loss

    # warm-up: caches, the step workspace, the allocator
    for f in (py_loop, py_call, cpp, py_step, cpp_step):
        f()
    _, ref = cpp()
    assert py_loop()[1] == ref and py_call()[1] == ref, "the Python decodes must be the C++ decoder's tokens"
    # the decodes first, then the steps (a step between two decodes would leave the caches cold for the
    # next one); within a round the order rotates, so no side always runs first
    t = {"py_loop": [], "py_call": [], "cpp": [], "py_step": [], "cpp_step": []}
    decode = [("cpp", cpp), ("py_loop", py_loop), ("py_call", py_call)]
    for r in range(a.repeats):
        for name, f in decode[r % 3:] + decode[:r % 3]:
            t[name].append(f()[0])
    step = [("cpp_step", cpp_step), ("py_step", py_step)]
    for r in range(a.repeats):
        for name, f in step[r % 2:] + step[:r % 2]:
            t[name].append(f()[0])
    ms_tok = {k: [1e3 * x / n for x in t[k]] for k in ("cpp", "py_loop", "py_call")}
    ms_step = {k: [1e3 * x for x in t[k]] for k in ("cpp_step", "py_step")}
    res = {
        "config": {**cfg, "mode": a.mode, "tokens": n, "batch": a.batch, "seq": a.seq, "K": a.K, "repeats": a.repeats},
        "cpu": platform.processor() or platform.machine(),
        "load_before": os.getloadavg(),
        "decode_ms_per_token": {k: spread(v) for k, v in ms_tok.items()},
        "step_ms": {k: spread(v) for k, v in ms_step.items()},
    }
    # the overhead: the median over the rounds of each round's ratio (the two sides of a round ran back to
    # back, so a slow period of the machine moves both), and beside it the ratio of the two medians
    def overhead(py, c):
        return statistics.median(p / q for p, q in zip(py, c)) - 1, statistics.median(py) / statistics.median(c) - 1
    res["decode_loop_overhead"], res["decode_loop_overhead_of_medians"] = overhead(t["py_loop"], t["cpp"])
    res["decode_call_overhead"], res["decode_call_overhead_of_medians"] = overhead(t["py_call"], t["cpp"])
    res["step_overhead"], res["step_overhead_of_medians"] = overhead(t["py_step"], t["cpp_step"])
    res["load_after"] = os.getloadavg()
    ok = res["decode_loop_overhead"] <= 0.05 and res["step_overhead"] <= 0.02

    print(f"model D {D}, {a.layers} layers, V 257 ({model.num_parameters} parameters); load {res['load_before'][0]:.2f}")
    print(f"decode, mode {a.mode}, {n} tokens, greedy (ms/token: median [min, max] of {a.repeats})")
    for k, label in (("cpp", "C++ decoder (generate)"), ("py_loop", "Python loop, 1 token a call"), ("py_call", "Python, one generate call")):
        s = res["decode_ms_per_token"][k]
        print(f"  {label:30s} {s['median']:.4f} [{s['min']:.4f}, {s['max']:.4f}]")
    print(f"  overhead (median of the rounds' ratios; of the medians): loop {100 * res['decode_loop_overhead']:+.2f}% "
          f"({100 * res['decode_loop_overhead_of_medians']:+.2f}%), one call {100 * res['decode_call_overhead']:+.2f}% "
          f"({100 * res['decode_call_overhead_of_medians']:+.2f}%)  (target: loop within 5%)")
    print(f"step, B {a.batch} x T {a.seq}, K {a.K} (ms: median [min, max] of {a.repeats})")
    for k, label in (("cpp_step", "C++ (multipass_step)"), ("py_step", "Python fbt.multipass_step")):
        s = res["step_ms"][k]
        print(f"  {label:30s} {s['median']:.3f} [{s['min']:.3f}, {s['max']:.3f}]")
    print(f"  overhead (median of the rounds' ratios; of the medians): {100 * res['step_overhead']:+.2f}% "
          f"({100 * res['step_overhead_of_medians']:+.2f}%)  (target: within 2%)")
    print("PASS" if ok else "FAIL")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
