#!/usr/bin/env python3
"""check_peer.py: proof that the PyTorch peer (fbt_torch.py) computes what fbt computes.

fbt's bench_e2e writes, per fuser (none, glu, gated_add, concat), a checkpoint with perturbed weights
(tiny config, 2 kv heads: GQA), a fixed batch with a per-pass prefix, and its results on it: per-pass
losses and the objective of a K-pass step, the norm of every parameter's gradient, and greedy decodes of
a prompt in standard, soft and fused(1) mode:

    bench_e2e --dump-check DIR   ->  DIR/check_<fuser>.safetensors, DIR/check_<fuser>.json

This script loads each checkpoint into the peer, runs the same step and decodes, and compares:
per-pass losses within --loss-rtol (1e-4) relative, every gradient norm within --grad-rtol (1e-3)
relative, greedy tokens exactly. Exit status 0 when everything agrees, 1 otherwise, 2 when torch is
missing (skipped).

    python check_peer.py --bench build/benchmarks/bench_e2e          # runs the dump into a temp dir
    python check_peer.py --dump DIR                                  # uses an existing dump
    python check_peer.py --cli build/tools/fbt                       # also: a model trained by the fbt CLI
    python check_peer.py --bench build/benchmarks/bench_e2e --bf16   # also: the peer's bf16 autocast vs its fp32

--bf16 adds a self-check of the peer's mixed precision (bench_peer.py --precision bf16): on each dumped
checkpoint and batch, the peer's per-pass losses and objective under torch.autocast("cpu", bfloat16)
against its own fp32 ones. It passes when (a) the products really ran in bf16 (the dtype of a q_proj
output, seen by a forward hook, is bfloat16), (b) every loss is within --bf16-rtol (2e-3) relative of the
fp32 loss, (c) the largest relative loss difference of each dump is above --bf16-floor (1e-6: fp32 run
twice agrees exactly, so a difference below that means autocast had no effect) and (d) every gradient norm
is within --bf16-grad-rtol (5e-2) relative. Measured here (torch 2.15, tiny dumps with losses near 5.7):
loss differences 2.5e-6 to 4.9e-5, gradient norms within 8e-3. It also reports (does not check) how many
greedy tokens the bf16 decoder shares with the fp32 one. fbt's own bf16 numbers are not compared: the
two bf16 paths round different intermediates, so they agree only to the bf16 tolerance, which (b) already
states for the peer.

--cli adds an independent check on trained weights: it trains a small GQA model (fuser glu) with
`fbt train` on a generated text, then compares `fbt eval` (per-pass validation losses of 3
passes on the text's fixed validation windows; printed to 4 decimals) and `fbt sample --temperature 0`
(greedy, in standard, soft and fused(2)) with the peer on the same windows and prompt. The text is
blank-line separated paragraphs, so windows and greedy continuations cross document starts.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "fbt", "hf"))  # fbt_torch.py, the one PyTorch implementation

FUSERS = ("none", "glu", "gated_add", "concat")


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-30)


def check_one(path_json: str, path_st: str, loss_rtol: float, grad_rtol: float, verbose: bool) -> dict:
    import torch
    import fbt_torch as ft

    ref = json.load(open(path_json))
    m = ft.load_checkpoint(path_st)
    B, T, K = ref["B"], ref["T"], ref["K"]
    tok = torch.tensor(ref["tokens"]).view(B, T)
    tgt = torch.tensor(ref["targets"]).view(B, T)
    prefix = torch.tensor(ref["prefix"]).view(K, B) if ref.get("prefix") else None
    # optional (B*T) 0/1 document starts of the batch (fbt's Batch::doc_start); absent: one document per row
    ds = torch.tensor(ref["doc_start"]).view(B, T).bool() if ref.get("doc_start") else None
    m.zero_grad(set_to_none=True)
    obj, losses = m.kpass(tok, tgt, K=K, lam=ref["lambda"], sigma=0.0, prefix=prefix,
                          detach=ref.get("detach", False), grad_passes=ref.get("grad_passes", 0), doc_start=ds)
    obj.backward()
    obj, losses = obj.detach(), [l.detach() for l in losses]
    out = {"fuser": ref["fuser"], "K": K, "ok": True, "failures": []}
    loss_err = [rel(float(l), r) for l, r in zip(losses, ref["loss"])]
    out["loss_peer"] = [float(l) for l in losses]
    out["loss_fbt"] = ref["loss"]
    out["loss_max_rel"] = max(loss_err)
    out["objective_rel"] = rel(float(obj), ref["objective"])
    if out["loss_max_rel"] > loss_rtol or out["objective_rel"] > loss_rtol:
        out["failures"].append(f"losses differ: peer {out['loss_peer']} fbt {ref['loss']}")
    grads = {}
    for name, p in m.named_parameters():
        grads[name] = 0.0 if p.grad is None else float(p.grad.double().norm())
    worst, worst_name = 0.0, None
    for name, gn in ref["grad_norm"].items():
        if name not in grads:
            out["failures"].append(f"gradient of {name}: no such peer parameter")
            continue
        # a norm that is zero on one side must be (near) zero on the other
        e = abs(grads[name] - gn) / max(abs(gn), 1e-12) if gn > 1e-12 else abs(grads[name])
        if e > worst:
            worst, worst_name = e, name
        if e > grad_rtol:
            out["failures"].append(f"gradient norm of {name}: peer {grads[name]:.9g} fbt {gn:.9g} (rel {e:.2e})")
    out["grad_max_rel"], out["grad_worst"], out["grad_tensors"] = worst, worst_name, len(ref["grad_norm"])
    dec = ft.Decoder(m)
    out["greedy"] = {}
    for mode, want in (ref.get("greedy") or {}).items():
        got = dec.generate_greedy(ref["prompt"], mode, len(want))
        same = got == want
        out["greedy"][mode] = {"tokens": len(want), "equal": same}
        if not same:
            first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            out["failures"].append(f"greedy {mode} differs at token {first}: peer {got} fbt {want}")
    out["ok"] = not out["failures"]
    return out


def bf16_check(path_json: str, path_st: str, rtol: float, floor: float, grad_rtol: float) -> dict:
    """The peer under autocast bf16 against the peer in fp32, on one dumped checkpoint and batch."""
    import torch
    import fbt_torch as ft

    ref = json.load(open(path_json))
    m = ft.load_checkpoint(path_st)
    B, T, K = ref["B"], ref["T"], ref["K"]
    tok = torch.tensor(ref["tokens"]).view(B, T)
    tgt = torch.tensor(ref["targets"]).view(B, T)
    prefix = torch.tensor(ref["prefix"]).view(K, B) if ref.get("prefix") else None
    ds = torch.tensor(ref["doc_start"]).view(B, T).bool() if ref.get("doc_start") else None
    seen = []
    hook = m.model.layers[0].self_attn.q_proj.register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
    res = {}
    for name, dt in (("fp32", None), ("bf16", torch.bfloat16)):
        seen.clear()
        m.zero_grad(set_to_none=True)
        with ft.autocast(dt):
            obj, losses = m.kpass(tok, tgt, K=K, lam=ref["lambda"], sigma=0.0, prefix=prefix,
                                  detach=ref.get("detach", False), grad_passes=ref.get("grad_passes", 0), doc_start=ds)
        obj.backward()  # outside autocast, as torch recommends
        res[name] = {"loss": [float(l.detach()) for l in losses], "objective": float(obj.detach()), "dtype": str(seen[0]).replace("torch.", ""),
                     "grad": {n: float(p.grad.double().norm()) for n, p in m.named_parameters() if p.grad is not None}}
    hook.remove()
    f32, b16 = res["fp32"], res["bf16"]
    out = {"fuser": ref["fuser"], "K": K, "loss_fp32": f32["loss"], "loss_bf16": b16["loss"], "product_dtype": b16["dtype"],
           "rtol": rtol, "floor": floor, "grad_rtol": grad_rtol, "failures": []}
    out["loss_rel"] = [rel(b, a) for a, b in zip(f32["loss"], b16["loss"])] + [rel(b16["objective"], f32["objective"])]
    out["loss_max_rel"] = max(out["loss_rel"])
    gn = [(abs(b16["grad"][n] - g) / g if g > 1e-12 else abs(b16["grad"][n]), n) for n, g in f32["grad"].items()]
    out["grad_max_rel"], out["grad_worst"] = max(gn)
    if b16["dtype"] != "bfloat16" or f32["dtype"] != "float32":
        out["failures"].append(f"q_proj output dtype {b16['dtype']} under autocast bf16 ({f32['dtype']} in fp32): autocast not in effect")
    if out["loss_max_rel"] > rtol:
        out["failures"].append(f"bf16 losses {b16['loss']} differ from fp32 {f32['loss']} by {out['loss_max_rel']:.2e} > {rtol:g}")
    if out["loss_max_rel"] < floor:
        out["failures"].append(f"bf16 losses equal fp32 to {out['loss_max_rel']:.2e} < {floor:g}: bf16 had no effect")
    if out["grad_max_rel"] > grad_rtol:
        out["failures"].append(f"gradient norm of {out['grad_worst']} differs by {out['grad_max_rel']:.2e} > {grad_rtol:g}")
    greedy = {}
    for mode, want in (ref.get("greedy") or {}).items():
        a = ft.Decoder(m).generate_greedy(ref["prompt"], mode, len(want))
        b = ft.Decoder(m, amp=torch.bfloat16).generate_greedy(ref["prompt"], mode, len(want))
        greedy[mode] = f"{next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))}/{len(a)}"
    out["greedy_same_prefix"] = greedy
    out["ok"] = not out["failures"]
    return out


def cli_check(fbt: str, workdir: str) -> bool:
    """Trains with the fbt CLI, then compares its eval losses and greedy samples with the peer's."""
    import math
    import random
    import re

    import torch
    import fbt_torch as ft

    words = ("the quick brown fox jumps over lazy dog and then some more words appear in this text "
             "for a test of models").split()
    rnd = random.Random(0)
    # paragraphs separated by blank lines: fbt makes each one a document ([SEP] + bytes), so the
    # validation windows hold document starts (plain positions, RoPE restarting, masked attention)
    paras = [" ".join(rnd.choice(words) for _ in range(rnd.randint(6, 14))) + "\n" for _ in range(300)]
    text = "\n".join(paras)
    data = os.path.join(workdir, "cli_text.txt")
    with open(data, "w") as fh:
        fh.write(text)
    run = os.path.join(workdir, "cli_run")
    T, nwin = 64, 8
    subprocess.run([fbt, "train", "--data", data, "--doc_split", "blank_line", "--hidden_size", "64", "--num_hidden_layers", "2",
                    "--num_attention_heads", "4", "--num_key_value_heads", "2", "--intermediate_size", "160",
                    "--seq_len", str(T), "--batch_size", "8", "--steps", "400", "--feedback_start", "0.3",
                    "--eval_every", "0", "--eval_windows", "2", "--seq_eval_windows", "1", "--monitor_passes", "0",
                    "--out_dir", run, "--progress", "false"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ck = os.path.join(run, "checkpoint")
    ev = subprocess.run([fbt, "eval", "--checkpoint", ck, "--data", data, "--doc_split", "blank_line", "--seq_len", str(T),
                         "--windows", str(nwin), "--passes", "3", "--seq_windows", "0", "--monitor", "0"],
                        check=True, capture_output=True, text=True).stdout
    want = [float(x) for x in re.findall(r"pass \d+ validation loss ([0-9.]+)", ev)]
    m = ft.load_checkpoint(ck)
    # fbt's TextDataset (val_fraction 0.1): the last k = round(0.1 * docs) documents, each [SEP] + bytes,
    # form the validation stream; windows of T+1 tokens at stride T; a document starts at t = 0 and at SEP
    k = min(len(paras) - 1, max(1, int(math.floor(0.1 * len(paras) + 0.5))))
    val = [t for p in paras[-k:] for t in [ft.SEP] + list(p.encode())]
    win = [val[i * T:i * T + T + 1] for i in range(nwin)]
    x, y = torch.tensor([w[:T] for w in win]), torch.tensor([w[1:] for w in win])
    with torch.no_grad():
        _, got = m.kpass(x, y, K=3, doc_start=x == ft.SEP)
    got = [float(v) for v in got]
    ok = len(want) == 3 and all(abs(a - b) <= 1.5e-4 for a, b in zip(got, want))
    print(f"  cli eval  K=3 (trained weights, {nwin} windows of {T}): peer {['%.6f' % v for v in got]} fbt {want} "
          f"(fbt prints 4 decimals)  {'OK' if ok else 'FAIL'}")
    prompt = "the quick"
    dec = ft.Decoder(m)
    for mode in ("standard", "soft", "fused(2)"):
        out = subprocess.run([fbt, "sample", "--checkpoint", ck, "--prompt", prompt, "--mode", mode, "--temperature", "0",
                              "--max_new_tokens", "120"], check=True, capture_output=True, text=True).stdout
        fbt_text = out.split("\n", 1)[1].rstrip("\n")
        toks = dec.generate_greedy([ft.SEP] + list(prompt.encode()), mode, 120)
        peer_text = prompt + "".join("\n<|sep|>\n" if t == ft.SEP else chr(t) for t in toks)
        same = peer_text == fbt_text
        ok &= same
        print(f"  cli greedy {mode:9s}: {'equal' if same else 'DIFFER'} ({toks.count(ft.SEP)} document starts; "
              f"{fbt_text[len(prompt):][:50]!r}...)")
        if not same:
            print(f"            peer {peer_text!r}\n            fbt  {fbt_text!r}")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=None, help="fbt's bench_e2e (default: build/benchmarks/bench_e2e)")
    ap.add_argument("--dump", default=None, help="an existing --dump-check directory (skips running bench_e2e)")
    ap.add_argument("--fusers", default=None, help="comma list (default: every check_*.json of the dump)")
    ap.add_argument("--cli", default=None, help="the fbt command (build/tools/fbt): also check weights it trained")
    ap.add_argument("--loss-rtol", type=float, default=1e-4)
    ap.add_argument("--grad-rtol", type=float, default=1e-3)
    ap.add_argument("--bf16", action="store_true", help="also check the peer's autocast bf16 against its own fp32")
    ap.add_argument("--bf16-rtol", type=float, default=2e-3, help="largest relative bf16-vs-fp32 loss difference")
    ap.add_argument("--bf16-floor", type=float, default=1e-6, help="smallest largest-difference (below: autocast had no effect)")
    ap.add_argument("--bf16-grad-rtol", type=float, default=5e-2, help="largest relative bf16-vs-fp32 gradient norm difference")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("check_peer: torch is not importable in this python; skipped (run it with a python that has torch, e.g. $FBT_TORCH_PYTHON)")
        return 2
    torch.set_num_threads(1)
    dump = a.dump
    tmp = None
    if dump is None:
        bench = a.bench or os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "benchmarks", "bench_e2e")
        if not os.path.exists(bench):
            print(f"check_peer: {bench} not found; build fbt's benchmarks or pass --bench / --dump")
            return 1
        tmp = tempfile.TemporaryDirectory(prefix="fbt_check_")
        dump = tmp.name
        subprocess.run([bench, "--dump-check", dump], check=True, stdout=subprocess.DEVNULL)
    results, ok = [], True
    names = a.fusers.split(",") if a.fusers else sorted(
        n[len("check_"):-len(".json")] for n in os.listdir(dump) if n.startswith("check_") and n.endswith(".json"))
    for f in names:
        pj, ps = os.path.join(dump, f"check_{f}.json"), os.path.join(dump, f"check_{f}.safetensors")
        if not os.path.exists(pj):
            print(f"  {f:9s} MISSING {pj}")
            ok = False
            continue
        r = check_one(pj, ps, a.loss_rtol, a.grad_rtol, a.verbose)
        results.append(r)
        ok &= r["ok"]
        greedy = ", ".join(f"{k} {v['tokens']} tok {'equal' if v['equal'] else 'DIFFER'}" for k, v in r["greedy"].items())
        print(f"  {f:9s} K={r['K']}: losses max rel err {r['loss_max_rel']:.2e} (objective {r['objective_rel']:.2e}); "
              f"grad norms of {r['grad_tensors']} tensors max rel err {r['grad_max_rel']:.2e} ({r['grad_worst']}); "
              f"greedy: {greedy}  {'OK' if r['ok'] else 'FAIL'}")
        if a.verbose or not r["ok"]:
            print(f"            peer losses {['%.7f' % x for x in r['loss_peer']]}, fbt {['%.7f' % x for x in r['loss_fbt']]}")
            for msg in r["failures"]:
                print("            " + msg)
    bf16 = []
    if a.bf16:
        print(f"  bf16 (peer autocast bf16 vs peer fp32; losses within {a.bf16_rtol:g} and above {a.bf16_floor:g} relative, "
              f"gradient norms within {a.bf16_grad_rtol:g}):")
        for f in names:
            pj, ps = os.path.join(dump, f"check_{f}.json"), os.path.join(dump, f"check_{f}.safetensors")
            if not os.path.exists(pj):
                continue
            r = bf16_check(pj, ps, a.bf16_rtol, a.bf16_floor, a.bf16_grad_rtol)
            bf16.append(r)
            ok &= r["ok"]
            print(f"  {f:9s} K={r['K']}: losses fp32 {['%.7f' % x for x in r['loss_fp32']]} bf16 {['%.7f' % x for x in r['loss_bf16']]}; "
                  f"max rel diff {r['loss_max_rel']:.2e} (tolerance {a.bf16_rtol:g}, floor {a.bf16_floor:g}); grad norms max rel diff "
                  f"{r['grad_max_rel']:.2e} ({r['grad_worst']}; tolerance {a.bf16_grad_rtol:g}); products in {r['product_dtype']}; "
                  f"greedy tokens equal to fp32 before the first difference: "
                  f"{', '.join(f'{k} {v}' for k, v in r['greedy_same_prefix'].items())}  {'OK' if r['ok'] else 'FAIL'}")
            for msg in r["failures"]:
                print("            " + msg)
    if a.cli:
        with tempfile.TemporaryDirectory(prefix="fbt_check_cli_") as wd:
            ok &= cli_check(a.cli, wd)
    import torch as _t
    tol = f"loss {a.loss_rtol:g}, grad norm {a.grad_rtol:g} relative"
    if a.bf16:
        tol += f"; bf16 vs fp32: loss {a.bf16_floor:g} to {a.bf16_rtol:g}, grad norm {a.bf16_grad_rtol:g}"
    print(f"check_peer: {'PASS' if ok else 'FAIL'} (torch {_t.__version__}; tolerances: {tol})")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"ok": ok, "torch": _t.__version__, "results": results, "bf16": bf16}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
