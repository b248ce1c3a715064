#!/usr/bin/env python3
"""run_e2e.py: fbt against its PyTorch peer, end to end, in the same run.

For every (config, threads, measure) it runs fbt's bench_e2e and the peer (benchmarks/peer/bench_peer.py:
eager "torch" and, where it works here, "torch.compile") alternately, each in a fresh process, in each
precision of --precisions (fp32 by default; bf16: fbt's `--precision bf16`, the peer's torch.autocast bf16):

    round 1: fbt, torch, torch.compile [fp32], fbt, torch, torch.compile [bf16];  round 2: ...  (--rounds, default 5)

and reports, per measure and precision, each side's median [p25-p75] (the median over rounds of each process's own
median and quartiles of its timed repetitions), the speedup peer/fbt computed pair by pair (per round:
peer time / fbt time of the same round; then the median of those ratios, with their range), and each
side's peak RSS; with two precisions also each side's fp32/bf16 time ratio (per round, then the median).
Results go to benchmarks/results/e2e.json (everything, including every raw JSON line), e2e.md (the
tables) and cpu.json (the CPU: benchmarks/cpu_info.py).

--peer: auto (torch and torch.compile when torch.compile works here), none, or a comma list of the
variants to run side by side in every round (torch,torch.compile). torch.compile has no sgemm (a single
torch.mm); its column shows "n/a" there.

Both sides get the same environment: OMP_WAIT_POLICY=PASSIVE, GLIBC_TUNABLES with high malloc mmap and
trim thresholds (glibc.malloc.mmap_threshold=1 GiB, glibc.malloc.trim_threshold=4 GiB - 1; checked to take
effect with glibc 2.36: allocations up to 1 GiB stay in the heap and freed memory is not returned to the
kernel every step), OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset. Both start from the same initial
weights: `bench_e2e --save-init DIR` writes them, the peer loads them (--init).

torch is optional: the peer is skipped with a message when it cannot be imported (--python, default
$FBT_TORCH_PYTHON when set, else python3). The fbt side then runs alone.

    python3 benchmarks/run_e2e.py                                    # everything (long: see --help)
    python3 benchmarks/run_e2e.py --quick --configs tiny --threads 1 # smoke test
    python3 benchmarks/run_e2e.py --configs tiny --threads 1 --measures train,sgemm --precisions fp32,bf16 \
        --peer torch,torch.compile --rounds 1 --reps 1 --warmup 0 --out /tmp/peer_try   # functional check
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import cpu_info  # noqa: E402
PEER = os.path.join(HERE, "peer", "bench_peer.py")
FAIR_SET = {
    "OMP_WAIT_POLICY": "PASSIVE",
    "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967295",
}
FAIR_UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
PRECISIONS = ("fp32", "bf16")
PEER_VARIANTS = ("torch", "torch.compile")
MEASURES = ["train", "fbt_k1", "kpass2", "kpass3", "kpass3_g1", "mix", "forward", "decode_standard_128", "decode_soft_128",
            "decode_standard_1024", "decode_soft_1024", "prefill_fused1"]
UNITS = {m: ("ms/token" if m.startswith("decode_") else "ms/step") for m in MEASURES}
UNITS.update({"prefill_fused1": "ms/prefill", "sgemm": "ms (1024^3)"})


def fair_env():
    e = dict(os.environ)
    for k in FAIR_UNSET:
        e.pop(k, None)
    e.update(FAIR_SET)
    e["FBT_PEER_FAIR_ENV"] = "1"  # bench_peer.py need not re-execute itself
    return e


def run_json(cmd, env, timeout):
    """Runs cmd; returns (the last JSON line of its stdout, None) or (None, error text)."""
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        return None, f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-800:]}"
    try:
        return json.loads(lines[-1]), None
    except json.JSONDecodeError as e:
        return None, f"bad JSON ({e}): {lines[-1][:300]}"


def machine_info():
    info = {"platform": platform.platform(), "python": sys.version.split()[0], "libc": " ".join(platform.libc_ver())}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        keep = ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)", "L1d cache", "L2 cache",
                "L3 cache", "Flags")
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in keep:
                v = v.strip()
                if k.strip() == "Flags":
                    v = " ".join(f for f in v.split() if f.startswith(("avx", "fma", "amx")))
                info[k.strip()] = v
    except OSError:
        pass
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["MemTotal"] = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return info


def find_python(arg):
    """The peer's python: --python, else $FBT_TORCH_PYTHON, else python3 (torch_probe says whether it has torch)."""
    if arg:
        return arg
    return os.environ.get("FBT_TORCH_PYTHON") or "python3"


def torch_probe(py, env):
    """(version, rss in MB right after `import torch`) or (None, why)."""
    code = "import resource, torch; print(torch.__version__); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    try:
        p = subprocess.run([py, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    v, rss = p.stdout.split()
    return v, float(rss)


def quart(xs):
    xs = sorted(xs)
    def q(p):
        x = p * (len(xs) - 1)
        i = int(x)
        return xs[i] + (x - i) * (xs[i + 1] - xs[i]) if i + 1 < len(xs) else xs[i]
    return q(0.25), q(0.5), q(0.75)


def summarize(runs):
    """Per impl: median over rounds of the runs' median, p25, p75, peak RSS."""
    ok = [r for r in runs if r is not None]
    if not ok:
        return None
    med = lambda k: statistics.median(r[k] for r in ok)
    return {"median_ms": med("median_ms"), "p25_ms": med("p25_ms"), "p75_ms": med("p75_ms"),
            "round_medians_ms": [r["median_ms"] for r in ok], "peak_rss_mb": med("peak_rss_mb"),
            "tokens_per_s": med("tokens_per_s"), "gflops": med("gflops") if "gflops" in ok[0] else None, "rounds": len(ok)}


def fmt_ms(x):
    return f"{x:.3g}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def parse_peer(arg):
    """--peer: (variants, auto?)."""
    if arg == "none":
        return [], False
    if arg == "auto":
        return list(PEER_VARIANTS), True
    v = [p.strip() for p in arg.split(",") if p.strip()]
    bad = [p for p in v if p not in PEER_VARIANTS]
    if bad:
        raise SystemExit(f"run_e2e: --peer: unknown variant(s) {bad}; use auto, none or a comma list of {', '.join(PEER_VARIANTS)}")
    return list(dict.fromkeys(v)), False


def fbt_precision_probe(bench, env):
    """None when bench_e2e runs bf16 (its JSON line says "precision": "bf16"), else why not."""
    j, err = run_json([bench, "--config", "tiny", "--threads", "1", "--measure", "sgemm", "--reps", "1", "--warmup", "0",
                       "--precision", "bf16"], env, 300)
    if err:
        return err
    if j.get("precision") != "bf16":
        return f"its JSON line has precision {j.get('precision')!r} (a bench_e2e without --precision ignores it): rebuild it"
    return None


def run_check(py, bench, env, bf16, log):
    """check_peer.py (fp32: the peer equals fbt; with bf16 also the peer's bf16 against its fp32)."""
    cj = os.path.join(tempfile.gettempdir(), f"fbt_e2e_check_{os.getpid()}.json")
    p = subprocess.run([py, os.path.join(HERE, "peer", "check_peer.py"), "--bench", bench, "--json", cj] + (["--bf16"] if bf16 else []),
                       env=env, capture_output=True, text=True, timeout=1800)
    log(p.stdout.rstrip())
    check = {"ok": p.returncode == 0, "summary": p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-500:]}
    if os.path.exists(cj):
        r = json.load(open(cj))
        check["results"] = [{k: x[k] for k in ("fuser", "K", "loss_max_rel", "objective_rel", "grad_max_rel", "greedy", "ok")}
                            for x in r["results"]]
        if r.get("bf16"):
            check["bf16"] = [{k: x[k] for k in ("fuser", "K", "loss_fp32", "loss_bf16", "loss_max_rel", "grad_max_rel", "product_dtype",
                                                "rtol", "floor", "grad_rtol", "ok")} for x in r["bf16"]]
        os.remove(cj)
    if not check["ok"]:
        log("run_e2e: WARNING: the peer check failed (see above); the peer's times are recorded but suspect")
    return check


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "benchmarks", "bench_e2e"), help="fbt's bench_e2e")
    ap.add_argument("--python", default=None, help="python with torch (default $FBT_TORCH_PYTHON, else python3)")
    ap.add_argument("--configs", default="tiny,small")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--measures", default=",".join(MEASURES), help="comma list; 'sgemm' adds the BLAS ceilings")
    ap.add_argument("--precisions", default="fp32", help="comma list of fp32, bf16 (bf16: fbt --precision bf16, the peer "
                    "under torch.autocast bf16); each round runs every precision in turn")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per process")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--mix-reps", type=int, default=2, help="timed 33-step cycles per process for `mix`")
    ap.add_argument("--peer", default="auto", help="auto (torch + torch.compile if it works) | none | a comma list of "
                    "torch, torch.compile (run side by side in every round)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per process")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="directory for e2e.json, e2e.md and cpu.json")
    ap.add_argument("--no-check", action="store_true", help="skip check_peer.py (the peer-equals-fbt check run first)")
    ap.add_argument("--quick", action="store_true", help="1 round, 2 reps, 1 warm-up (smoke test)")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds, a.reps, a.warmup, a.mix_reps = 1, 2, 1, 1
    configs = [c for c in a.configs.split(",") if c]
    threads = [int(t) for t in a.threads.split(",") if t]
    measures = [m for m in a.measures.split(",") if m]
    precisions = list(dict.fromkeys(p for p in a.precisions.split(",") if p))
    if not precisions or any(p not in PRECISIONS for p in precisions):
        ap.error(f"--precisions: a comma list of {', '.join(PRECISIONS)}")
    requested, auto = parse_peer(a.peer)
    log = lambda *x: print(*x, file=sys.stderr, flush=True)

    if not os.path.exists(a.bench):
        log(f"run_e2e: fbt's benchmark {a.bench} not found; build it (cmake --build build --target bench_e2e) or pass --bench")
        return 1
    env = fair_env()
    fbt_skip = {}  # precision -> why fbt does not run it
    if "bf16" in precisions:
        why = fbt_precision_probe(a.bench, env)
        if why:
            fbt_skip["bf16"] = f"fbt's bench_e2e does not run bf16: {why}"
            log("run_e2e: " + fbt_skip["bf16"] + "; fbt's bf16 side is skipped")
    py = find_python(a.python)
    peer_impls, peer_note = [], None
    torch_version, torch_import_rss = None, None
    if requested:
        torch_version, torch_import_rss = torch_probe(py, env)
        if torch_version is None:
            peer_note = f"peer skipped: torch is not importable with {py} ({torch_import_rss})"
            log("run_e2e: " + peer_note)
            torch_import_rss = None
        else:
            peer_impls = requested
            log(f"run_e2e: peer = torch {torch_version} ({py}), variants {peer_impls}{' (auto)' if auto else ''}, precisions {precisions}")

    check = None
    if peer_impls and not a.no_check:  # the peer must compute what fbt computes before its times mean anything
        check = run_check(py, a.bench, env, "bf16" in precisions, log)

    tmp = tempfile.TemporaryDirectory(prefix="fbt_e2e_init_")
    for c in configs:
        _, err = run_json([a.bench, "--save-init", tmp.name, "--config", c], env, 600)
        if err:
            log(f"run_e2e: bench_e2e --save-init failed for {c}: {err}")
            return 1

    results, raw, compile_failed = [], [], {}  # compile_failed: precision -> error
    t_start = datetime.datetime.now()
    for c in configs:
        for th in threads:
            for meas in measures:
                reps = a.mix_reps if meas == "mix" else a.reps
                slots = []  # (impl, precision) in the order of a round
                for prec in precisions:
                    slots += [("fbt", prec)] if prec not in fbt_skip else []
                    slots += [(i, prec) for i in peer_impls
                              if not (i == "torch.compile" and (prec in compile_failed or meas == "sgemm"))]
                runs = {s: [] for s in slots}
                errors = {}
                for rnd in range(a.rounds):
                    for impl, prec in list(slots):
                        pflag = ["--precision", prec] if prec != "fp32" else []  # fp32: the command line of old builds
                        if impl == "fbt":
                            cmd = [a.bench, "--config", c, "--threads", str(th), "--measure", meas, "--reps", str(reps),
                                   "--warmup", str(a.warmup)] + pflag
                        else:
                            cmd = [py, PEER, "--config", c, "--threads", str(th), "--measure", meas, "--reps", str(reps),
                                   "--warmup", str(a.warmup), "--init", tmp.name] + pflag + (["--compile"] if impl == "torch.compile" else [])
                        j, err = run_json(cmd, env, a.timeout)
                        if j is not None and j.get("precision", "fp32") != prec:
                            j, err = None, f"asked for {prec}, the JSON line says {j.get('precision', 'nothing (fp32)')}"
                        if j is not None and impl == "torch.compile" and j.get("impl") != "torch.compile":
                            compile_failed[prec] = j.get("compile_error", "unknown")
                            log(f"run_e2e: torch.compile does not work here in {prec} ({compile_failed[prec]}); eager torch only from now on")
                            err, j = "compile failed: " + compile_failed[prec], None
                            slots.remove((impl, prec))
                        if err:
                            errors.setdefault(f"{impl} {prec}", []).append(err)
                            log(f"run_e2e: {c} t{th} {meas} {impl} {prec} round {rnd + 1}: {err}")
                        runs[(impl, prec)].append(j)
                        if j is not None:
                            raw.append(dict(j, precision=prec, round=rnd + 1, cmd=" ".join(shlex.quote(x) for x in cmd)))
                    line = " ".join(f"{i}/{p} {fmt_ms(rs[-1]['median_ms'])}" for (i, p), rs in runs.items() if rs and rs[-1])
                    log(f"  {c} threads {th} {meas} round {rnd + 1}/{a.rounds}: {line}")
                for prec in precisions:
                    row = {"config": c, "threads": th, "measure": meas, "precision": prec, "unit": UNITS.get(meas, "ms"), "impls": {}}
                    fbt_runs = runs.get(("fbt", prec), [])
                    for (impl, p), rs in runs.items():
                        if p != prec:
                            continue
                        s = summarize(rs)
                        if s is None:
                            continue
                        if impl != "fbt":
                            ratios = [q["median_ms"] / f["median_ms"] for q, f in zip(rs, fbt_runs) if q and f]
                            if ratios:
                                s["speedup_rounds"] = ratios
                                s["speedup"] = statistics.median(ratios)
                        if prec != "fp32" and ("fp32" in precisions):  # this precision against fp32, same impl, same rounds
                            base = runs.get((impl, "fp32"), [])
                            gains = [b["median_ms"] / q["median_ms"] for q, b in zip(rs, base) if q and b]
                            if gains:
                                s["vs_fp32_rounds"] = gains
                                s["vs_fp32"] = statistics.median(gains)
                        s["gemm_impl"] = next((r.get("gemm_impl") or r.get("blas") for r in rs if r), None)
                        row["impls"][impl] = s
                    if prec in fbt_skip:
                        row["fbt_skipped"] = fbt_skip[prec]
                    errs = {k: v for k, v in errors.items() if k.endswith(" " + prec)}
                    if errs:
                        row["errors"] = errs
                    results.append(row)

    import_rss_note = (f"{torch_import_rss:.0f} MB of the peer's peak RSS is `import torch` alone (this wheel maps its CUDA "
                       f"libraries even on a CPU-only machine)") if torch_import_rss else None
    cpu = cpu_info.collect()
    out = {
        "date": t_start.isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(x) for x in [sys.executable] + sys.argv),
        "machine": machine_info(),
        "cpu": cpu,
        "env": {k: env.get(k) for k in list(FAIR_SET) + list(FAIR_UNSET)},
        "versions": {"fbt_compiler": next((r.get("compiler") for r in raw if r.get("impl") == "fbt"), None),
                     "torch": torch_version, "python_peer": py},
        "settings": {"rounds": a.rounds, "reps": a.reps, "warmup": a.warmup, "mix_reps": a.mix_reps, "bench": a.bench,
                     "precisions": precisions,
                     "peer_variants": [i for i in peer_impls if not (i == "torch.compile" and len(compile_failed) == len(precisions))]},
        "peer_check": check, "peer_note": peer_note, "fbt_skipped": fbt_skip,
        "torch_compile_error": "; ".join(f"{p}: {e}" for p, e in compile_failed.items()) or None,
        "torch_import_rss_mb": torch_import_rss,
        "results": results, "raw": raw,
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "e2e.json"), "w") as f:
        json.dump(out, f, indent=1)
    with open(os.path.join(a.out, "cpu.json"), "w") as f:
        json.dump(cpu, f, indent=1)
    md = render_md(out, import_rss_note)
    with open(os.path.join(a.out, "e2e.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


def speed_cell(s, key="speedup", rounds="speedup_rounds"):
    if not s or key not in s:
        return "-"
    lo, hi = min(s[rounds]), max(s[rounds])
    return f"**{s[key]:.2f}x**" + (f" ({lo:.2f}-{hi:.2f})" if len(s[rounds]) > 1 else "")


def render_md(out, import_rss_note):
    m = out["machine"]
    cpu_line = cpu_info.summary_line(out.get("cpu") or m)
    precisions = out["settings"].get("precisions", ["fp32"])
    L = ["# fbt vs PyTorch, end to end", "",
         f"{out['date']}; {m.get('Model name', '?')}, {m.get('CPU(s)', '?')} CPUs, L2 {m.get('L2 cache', '?')}, "
         f"L3 {m.get('L3 cache', '?')}; {m.get('libc', '')}; fbt built with {out['versions']['fbt_compiler']}; "
         f"torch {out['versions']['torch'] or '(not available)'}.", "",
         f"Command: `{out['command']}`", "",
         f"{out['settings']['rounds']} rounds; each round runs fbt"
         + ((", then the peer (" + ", then ".join(f"`{p}`" for p in out["settings"]["peer_variants"]) + ")")
            if out["settings"]["peer_variants"] else " alone")
         + (f", in each precision in turn ({', '.join(precisions)})" if len(precisions) > 1 else f" ({precisions[0]})")
         + ", each a fresh process timing "
         f"{out['settings']['reps']} repetitions after {out['settings']['warmup']} warm-ups ({out['settings']['mix_reps']} "
         "33-step cycles for `mix`). Times: median over rounds of each process's median [p25-p75]. "
         "Speedup = peer time / fbt time in the same precision, computed per round, then the median (range over rounds). "
         "Precision bf16: fbt `--precision bf16` (the model's products with bf16 operands, fp32 accumulation; weights, "
         "optimizer, norms, softmax, loss fp32); the peer under `torch.autocast(\"cpu\", dtype=torch.bfloat16)` around "
         "forward and loss (fp32 master weights and AdamW); sgemm: bf16 operands. "
         "Environment of both sides: " + ", ".join(f"{k}={v}" for k, v in out["env"].items() if v) + "; "
         + ", ".join(k for k, v in out["env"].items() if not v) + " unset.", ""]
    if out.get("peer_note"):
        L += [f"**{out['peer_note']}**", ""]
    for p, why in (out.get("fbt_skipped") or {}).items():
        L += [f"**fbt {p} not run: {why}**", ""]
    if out.get("peer_check"):
        c = out["peer_check"]
        worst = lambda k: max((x[k] for x in c.get("results", [])), default=float("nan"))
        L += [f"Peer check (check_peer.py, same run): **{'PASS' if c['ok'] else 'FAIL'}**: per-pass losses within "
              f"{worst('loss_max_rel'):.1e} relative, gradient norms within {worst('grad_max_rel'):.1e}, greedy decodes "
              f"{'equal' if all(g['equal'] for x in c.get('results', []) for g in x['greedy'].values()) else 'DIFFERENT'} "
              f"(fusers {', '.join(x['fuser'] for x in c.get('results', []))}).", ""]
        if c.get("bf16"):
            b = c["bf16"]
            L += [f"Peer bf16 check (the peer under autocast bf16 against its own fp32, same dumps): "
                  f"**{'PASS' if all(x['ok'] for x in b) else 'FAIL'}**: per-pass losses differ by "
                  f"{min(x['loss_max_rel'] for x in b):.1e} to {max(x['loss_max_rel'] for x in b):.1e} relative (allowed "
                  f"{b[0]['floor']:g} to {b[0]['rtol']:g}), gradient norms by at most {max(x['grad_max_rel'] for x in b):.1e} "
                  f"(allowed {b[0]['grad_rtol']:g}), products in {', '.join(sorted({x['product_dtype'] for x in b}))}.", ""]
    if out.get("torch_compile_error"):
        L += [f"torch.compile fell back to eager: `{out['torch_compile_error']}`", ""]
    peers = out["settings"]["peer_variants"]
    L += [cpu_line, ""]
    head = "| config | threads | measure | precision | unit | fbt median [p25-p75] |"
    sep = "|---|---:|---|---|---|---:|"
    for p in peers:
        head += f" {p} median [p25-p75] | speedup {p}/fbt |"
        sep += "---:|---:|"
    head += " peak RSS MB fbt / " + " / ".join(peers) + " |" if peers else " peak RSS MB |"
    sep += "---:|"
    L += [head, sep]
    cell = lambda s: f"{fmt_ms(s['median_ms'])} [{fmt_ms(s['p25_ms'])}-{fmt_ms(s['p75_ms'])}]" if s else "-"
    for r in out["results"]:
        f = r["impls"].get("fbt")
        line = f"| {r['config']} | {r['threads']} | {r['measure']} | {r.get('precision', 'fp32')} | {r['unit']} | {cell(f)} |"
        rss = [f"{f['peak_rss_mb']:.0f}" if f else "-"]
        for p in peers:
            s = r["impls"].get(p)
            na = p == "torch.compile" and r["measure"] == "sgemm"
            line += f" {'n/a' if na else cell(s)} | {'n/a' if na else speed_cell(s)} |"
            rss.append(f"{s['peak_rss_mb']:.0f}" if s else "-")
        line += " " + " / ".join(rss) + " |"
        L.append(line)
    L.append("")
    if len(precisions) > 1 and "fp32" in precisions:
        impls = ["fbt"] + peers
        L += [cpu_line, "",
              "Each side against itself: fp32 time / " + " and ".join(p for p in precisions if p != "fp32")
              + " time of the same implementation (per round, then the median (range)); above 1: the lower precision is faster.", ""]
        head = "| config | threads | measure | precision |" + "".join(f" {i} fp32 / this |" for i in impls)
        sep = "|---|---:|---|---|" + "---:|" * len(impls)
        L += [head, sep]
        for r in out["results"]:
            if r.get("precision", "fp32") == "fp32":
                continue
            line = f"| {r['config']} | {r['threads']} | {r['measure']} | {r['precision']} |"
            for i in impls:
                na = i == "torch.compile" and r["measure"] == "sgemm"
                line += " n/a |" if na else f" {speed_cell(r['impls'].get(i), 'vs_fp32', 'vs_fp32_rounds')} |"
            L.append(line)
        L.append("")
    if import_rss_note:
        L += [import_rss_note + ".", ""]
    L += ["Peer: python/fbt/hf/fbt_torch.py (same model, same initial weights, same K-pass objective; "
          "checked against fbt by benchmarks/peer/check_peer.py). See benchmarks/peer/README.md.", ""]
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
