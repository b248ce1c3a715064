#!/usr/bin/env python3
"""run_e2e.py: fbt against its PyTorch peer, end to end, in the same run (issue 4).

For every (config, threads, measure) it runs fbt's bench_e2e and the peer (benchmarks/peer/bench_peer.py:
eager "torch" and, where it works here, "torch.compile") alternately, each in a fresh process:

    round 1: fbt, torch, torch.compile;  round 2: fbt, torch, torch.compile;  ...  (--rounds, default 5)

and reports, per measure, each side's median [p25-p75] (the median over rounds of each process's own
median and quartiles of its timed repetitions), the speedup peer/fbt computed pair by pair (per round:
peer time / fbt time of the same round; then the median of those ratios, with their range), and each
side's peak RSS. Results go to benchmarks/results/e2e.json (everything, including every raw JSON line)
and benchmarks/results/e2e.md (the table).

Both sides get the same environment: OMP_WAIT_POLICY=PASSIVE, GLIBC_TUNABLES with high malloc mmap and
trim thresholds (glibc.malloc.mmap_threshold=1 GiB, glibc.malloc.trim_threshold=4 GiB - 1; checked to take
effect with glibc 2.36: allocations up to 1 GiB stay in the heap and freed memory is not returned to the
kernel every step), OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset. Both start from the same initial
weights: `bench_e2e --save-init DIR` writes them, the peer loads them (--init).

torch is optional: the peer is skipped with a message when it cannot be imported (--python, default
/opt/torch-venv/bin/python if it exists, else python3). The fbt side then runs alone.

    python3 benchmarks/run_e2e.py                                    # everything (long: see --help)
    python3 benchmarks/run_e2e.py --quick --configs tiny --threads 1 # smoke test
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
PEER = os.path.join(HERE, "peer", "bench_peer.py")
FAIR_SET = {
    "OMP_WAIT_POLICY": "PASSIVE",
    "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967295",
}
FAIR_UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
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
    if arg:
        return arg
    return "/opt/torch-venv/bin/python" if os.path.exists("/opt/torch-venv/bin/python") else "python3"


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "benchmarks", "bench_e2e"), help="fbt's bench_e2e")
    ap.add_argument("--python", default=None, help="python with torch (default /opt/torch-venv/bin/python, else python3)")
    ap.add_argument("--configs", default="tiny,small")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--measures", default=",".join(MEASURES), help="comma list; 'sgemm' adds the BLAS ceilings")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per process")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--mix-reps", type=int, default=2, help="timed 33-step cycles per process for `mix`")
    ap.add_argument("--peer", default="auto", help="auto (torch + torch.compile if it works) | torch | torch.compile | none")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per process")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="directory for e2e.json and e2e.md")
    ap.add_argument("--no-check", action="store_true", help="skip check_peer.py (the peer-equals-fbt check run first)")
    ap.add_argument("--quick", action="store_true", help="1 round, 2 reps, 1 warm-up (smoke test)")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds, a.reps, a.warmup, a.mix_reps = 1, 2, 1, 1
    configs = [c for c in a.configs.split(",") if c]
    threads = [int(t) for t in a.threads.split(",") if t]
    measures = [m for m in a.measures.split(",") if m]
    log = lambda *x: print(*x, file=sys.stderr, flush=True)

    if not os.path.exists(a.bench):
        log(f"run_e2e: fbt's benchmark {a.bench} not found; build it (cmake --build build --target bench_e2e) or pass --bench")
        return 1
    env = fair_env()
    py = find_python(a.python)
    peer_impls, peer_note = [], None
    torch_version, torch_import_rss = None, None
    if a.peer != "none":
        torch_version, torch_import_rss = torch_probe(py, env)
        if torch_version is None:
            peer_note = f"peer skipped: torch is not importable with {py} ({torch_import_rss})"
            log("run_e2e: " + peer_note)
            torch_import_rss = None
        else:
            peer_impls = ["torch", "torch.compile"] if a.peer == "auto" else [a.peer]
            log(f"run_e2e: peer = torch {torch_version} ({py}), variants {peer_impls}")

    check = None
    if peer_impls and not a.no_check:  # the peer must compute what fbt computes before its times mean anything
        cj = os.path.join(tempfile.gettempdir(), f"fbt_e2e_check_{os.getpid()}.json")
        p = subprocess.run([py, os.path.join(HERE, "peer", "check_peer.py"), "--bench", a.bench, "--json", cj],
                           env=env, capture_output=True, text=True, timeout=1800)
        log(p.stdout.rstrip())
        check = {"ok": p.returncode == 0, "summary": p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-500:]}
        if os.path.exists(cj):
            r = json.load(open(cj))
            check["results"] = [{k: x[k] for k in ("fuser", "K", "loss_max_rel", "objective_rel", "grad_max_rel", "greedy", "ok")}
                                for x in r["results"]]
            os.remove(cj)
        if not check["ok"]:
            log("run_e2e: WARNING: the peer does not match fbt (see above); its times are recorded but suspect")

    tmp = tempfile.TemporaryDirectory(prefix="fbt_e2e_init_")
    for c in configs:
        _, err = run_json([a.bench, "--save-init", tmp.name, "--config", c], env, 600)
        if err:
            log(f"run_e2e: bench_e2e --save-init failed for {c}: {err}")
            return 1

    results, raw, compile_failed = [], [], None
    t_start = datetime.datetime.now()
    for c in configs:
        for th in threads:
            for meas in measures:
                reps = a.mix_reps if meas == "mix" else a.reps
                impls = ["fbt"] + [i for i in peer_impls if not (i == "torch.compile" and (compile_failed or meas == "sgemm"))]
                runs = {i: [] for i in impls}
                errors = {}
                for rnd in range(a.rounds):
                    for impl in list(impls):
                        if impl == "fbt":
                            cmd = [a.bench, "--config", c, "--threads", str(th), "--measure", meas, "--reps", str(reps),
                                   "--warmup", str(a.warmup)]
                        else:
                            cmd = [py, PEER, "--config", c, "--threads", str(th), "--measure", meas, "--reps", str(reps),
                                   "--warmup", str(a.warmup), "--init", tmp.name] + (["--compile"] if impl == "torch.compile" else [])
                        j, err = run_json(cmd, env, a.timeout)
                        if j is not None and impl == "torch.compile" and j.get("impl") != "torch.compile":
                            compile_failed = j.get("compile_error", "unknown")
                            log(f"run_e2e: torch.compile does not work here ({compile_failed}); eager torch only from now on")
                            err, j = "compile failed: " + compile_failed, None
                            impls.remove(impl)
                        if err:
                            errors.setdefault(impl, []).append(err)
                            log(f"run_e2e: {c} t{th} {meas} {impl} round {rnd + 1}: {err}")
                        runs.setdefault(impl, []).append(j)
                        if j is not None:
                            raw.append(dict(j, round=rnd + 1, cmd=" ".join(shlex.quote(x) for x in cmd)))
                    line = " ".join(f"{i} {fmt_ms(runs[i][-1]['median_ms'])}" for i in runs if runs[i] and runs[i][-1])
                    log(f"  {c} threads {th} {meas} round {rnd + 1}/{a.rounds}: {line}")
                row = {"config": c, "threads": th, "measure": meas, "unit": UNITS.get(meas, "ms"), "impls": {}}
                for impl, rs in runs.items():
                    s = summarize(rs)
                    if s is None:
                        continue
                    if impl != "fbt":
                        ratios = [p["median_ms"] / f["median_ms"] for p, f in zip(rs, runs["fbt"]) if p and f]
                        if ratios:
                            s["speedup_rounds"] = ratios
                            s["speedup"] = statistics.median(ratios)
                    row["impls"][impl] = s
                if errors:
                    row["errors"] = errors
                results.append(row)

    import_rss_note = (f"{torch_import_rss:.0f} MB of the peer's peak RSS is `import torch` alone (this wheel maps its CUDA "
                       f"libraries even on a CPU-only machine)") if torch_import_rss else None
    out = {
        "date": t_start.isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(x) for x in [sys.executable] + sys.argv),
        "machine": machine_info(),
        "env": {k: env.get(k) for k in list(FAIR_SET) + list(FAIR_UNSET)},
        "versions": {"fbt_compiler": next((r.get("compiler") for r in raw if r.get("impl") == "fbt"), None),
                     "torch": torch_version, "python_peer": py},
        "settings": {"rounds": a.rounds, "reps": a.reps, "warmup": a.warmup, "mix_reps": a.mix_reps, "bench": a.bench,
                     "peer_variants": [i for i in peer_impls if not (i == "torch.compile" and compile_failed)]},
        "peer_check": check, "peer_note": peer_note, "torch_compile_error": compile_failed, "torch_import_rss_mb": torch_import_rss,
        "results": results, "raw": raw,
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "e2e.json"), "w") as f:
        json.dump(out, f, indent=1)
    md = render_md(out, import_rss_note)
    with open(os.path.join(a.out, "e2e.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


def render_md(out, import_rss_note):
    m = out["machine"]
    L = ["# fbt vs PyTorch, end to end", "",
         f"{out['date']}; {m.get('Model name', '?')}, {m.get('CPU(s)', '?')} CPUs, L2 {m.get('L2 cache', '?')}, "
         f"L3 {m.get('L3 cache', '?')}; {m.get('libc', '')}; fbt built with {out['versions']['fbt_compiler']}; "
         f"torch {out['versions']['torch'] or '(not available)'}.", "",
         f"Command: `{out['command']}`", "",
         f"{out['settings']['rounds']} rounds; each round runs fbt"
         + ((", then the peer (" + ", then ".join(f"`{p}`" for p in out["settings"]["peer_variants"]) + ")")
            if out["settings"]["peer_variants"] else " alone")
         + ", each a fresh process timing "
         f"{out['settings']['reps']} repetitions after {out['settings']['warmup']} warm-ups ({out['settings']['mix_reps']} "
         "33-step cycles for `mix`). Times: median over rounds of each process's median [p25-p75]. "
         "Speedup = peer time / fbt time, computed per round, then the median (range over rounds). "
         "Environment of both sides: " + ", ".join(f"{k}={v}" for k, v in out["env"].items() if v) + "; "
         + ", ".join(k for k, v in out["env"].items() if not v) + " unset.", ""]
    if out.get("peer_note"):
        L += [f"**{out['peer_note']}**", ""]
    if out.get("peer_check"):
        c = out["peer_check"]
        worst = lambda k: max((x[k] for x in c.get("results", [])), default=float("nan"))
        L += [f"Peer check (check_peer.py, same run): **{'PASS' if c['ok'] else 'FAIL'}**: per-pass losses within "
              f"{worst('loss_max_rel'):.1e} relative, gradient norms within {worst('grad_max_rel'):.1e}, greedy decodes "
              f"{'equal' if all(g['equal'] for x in c.get('results', []) for g in x['greedy'].values()) else 'DIFFERENT'} "
              f"(fusers {', '.join(x['fuser'] for x in c.get('results', []))}).", ""]
    if out.get("torch_compile_error"):
        L += [f"torch.compile fell back to eager: `{out['torch_compile_error']}`", ""]
    peers = out["settings"]["peer_variants"]
    head = "| config | threads | measure | unit | fbt median [p25-p75] |"
    sep = "|---|---:|---|---|---:|"
    for p in peers:
        head += f" {p} median [p25-p75] | speedup {p}/fbt |"
        sep += "---:|---:|"
    head += " peak RSS MB fbt / " + " / ".join(peers) + " |" if peers else " peak RSS MB |"
    sep += "---:|"
    L += [head, sep]
    for r in out["results"]:
        f = r["impls"].get("fbt")
        cell = lambda s: f"{fmt_ms(s['median_ms'])} [{fmt_ms(s['p25_ms'])}-{fmt_ms(s['p75_ms'])}]" if s else "-"
        line = f"| {r['config']} | {r['threads']} | {r['measure']} | {r['unit']} | {cell(f)} |"
        rss = [f"{f['peak_rss_mb']:.0f}" if f else "-"]
        for p in peers:
            s = r["impls"].get(p)
            line += f" {cell(s)} |"
            if s and "speedup" in s:
                lo, hi = min(s["speedup_rounds"]), max(s["speedup_rounds"])
                line += f" **{s['speedup']:.2f}x**" + (f" ({lo:.2f}-{hi:.2f})" if len(s["speedup_rounds"]) > 1 else "") + " |"
            else:
                line += " - |"
            rss.append(f"{s['peak_rss_mb']:.0f}" if s else "-")
        line += " " + " / ".join(rss) + " |"
        L.append(line)
    L.append("")
    if import_rss_note:
        L += [import_rss_note + ".", ""]
    L += ["Peer: benchmarks/peer/fbt_torch.py (same model, same initial weights, same K-pass objective; "
          "checked against fbt by benchmarks/peer/check_peer.py). See benchmarks/peer/README.md.", ""]
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
