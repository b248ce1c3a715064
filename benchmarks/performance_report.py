#!/usr/bin/env python3
"""benchmarks/performance_report.py: docs/PERFORMANCE.md's tables from run_e2e.py results.

    python3 benchmarks/performance_report.py RESULTS_DIR [RESULTS_DIR ...] [--soft soft_overhead.jsonl] [--peak peak.json] > tables.md

A measure found in several RESULTS_DIRs keeps the fbt numbers of the first (ratios stay within one run).
The soft-decoding overhead is taken from bench_e2e's soft_overhead_* measures (standard and soft steps in
turn in one process), not from separate decode processes, whose latencies differ by more than 2% between
processes on this machine.

Reads each RESULTS_DIR/e2e.json (written by benchmarks/run_e2e.py) and prints, in markdown:
  1. the side-by-side table (fbt vs the PyTorch peer, median [p25-p75], speedup median (range), peak RSS),
     one row per (config, threads, measure, precision, peer);
  2. the targets, each computed from the same runs: every training step kind (train, kpass3, kpass3_g1) >=
     1.5x eager torch and >= 1.2x torch.compile in fp32, >= 2x eager torch autocast and >= 1.3x torch.compile
     under autocast in bf16 (set for AMX CPUs), share of the SGEMM ceiling (>= 80% for small at 1 thread;
     with --peak, bench_kernels' BM_Peak JSON: each step's share of the core's measured fp32 / bf16 peak);
     same run, same thread count), K-pass step vs K single-pass steps,
     grad_passes = 1 vs (K-1) forwards + one step, soft vs standard decode, decode latency vs the peer, peak
     memory vs the peer;
  3. when a RESULTS_DIR holds bf16 rows (run_e2e.py --precisions fp32,bf16): bf16 beside fp32, from that
     one run: each side's times in both precisions, its fp32/bf16 ratio and the peer/fbt speedups of both.
A line naming the CPU (benchmarks/cpu_info.py: RESULTS_DIR/cpu.json, else the record in e2e.json) stands
above every table; the soft-overhead table takes cpu.json beside the .jsonl file. Result files from before
the precision field (no "precision" in e2e.json) are fp32.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_info  # noqa: E402


def prec(r):
    return r.get("precision", "fp32")


def cpu_line_of(d):
    """The CPU of one results directory: its cpu.json, else e2e.json's cpu or machine record."""
    p = os.path.join(d, "cpu.json")
    if os.path.exists(p):
        return cpu_info.summary_line(json.load(open(p)))
    p = os.path.join(d, "e2e.json")
    if os.path.exists(p):
        j = json.load(open(p))
        return cpu_info.summary_line(j.get("cpu") or j.get("machine"))
    return "CPU: not recorded"


def cpu_header(lines):
    """One line per distinct CPU among the runs a table draws on."""
    lines = list(dict.fromkeys(lines))
    if len(lines) == 1:
        print(lines[0] + "\n")
    else:
        print("Runs on more than one CPU:\n")
        for l in lines:
            print(f"- {l}")
        print()


def load(dirs):
    rows, meta = {}, []
    for d in dirs:
        j = json.load(open(f"{d}/e2e.json"))
        j["_dir"], j["_cpu"] = d, cpu_line_of(d)
        meta.append(j)
        for r in j["results"]:
            r["_cpu"], r["_dir"] = j["_cpu"], d
            key = (r["config"], r["threads"], r["measure"], prec(r))
            if key in rows:  # a later run adds its peers; the fbt numbers of the first run stay (ratios are per run)
                for impl, v in r["impls"].items():
                    if impl != "fbt" and impl not in rows[key]["impls"]:
                        rows[key]["impls"][impl] = dict(v, _dir=d)
            else:
                rows[key] = r
    return rows, meta


def fmt_ms(x):
    return f"{x:.4g}"


def soft_overhead(path):
    """Median over processes of the interleaved standard/soft decode medians (bench_e2e soft_overhead_*)."""
    import statistics
    runs = {}
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            d = json.loads(line)
            runs.setdefault((d["config"], d["measure"]), []).append(d)
    print("\n### Soft decoding overhead (standard and soft steps in turn, in one process)\n")
    cj = os.path.join(os.path.dirname(os.path.abspath(path)), "cpu.json")
    cpu_header([cpu_info.summary_line(json.load(open(cj))) if os.path.exists(cj) else "CPU: not recorded"])
    print("| config | context | processes | standard us/token (median of medians) | soft us/token | overhead median (range) | met (<= 2%) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for (cfg, m), ds in sorted(runs.items(), key=lambda kv: (kv[0][0] != "tiny", int(kv[0][1].rsplit("_", 1)[1]))):
        ov = [d["overhead"] for d in ds]
        med = statistics.median(ov)
        print(f"| {cfg} | {m.rsplit('_', 1)[1]} | {len(ds)} | {1e3 * statistics.median(d['standard_median_ms'] for d in ds):.1f} | "
              f"{1e3 * statistics.median(d['soft_median_ms'] for d in ds):.1f} | {100 * med:+.2f}% ({100 * min(ov):+.2f}% to {100 * max(ov):+.2f}%) | {'yes' if med <= 0.02 else 'NO'} |")


def bf16_table(meta, all_peers):
    """bf16 beside fp32, per run that measured both (ratios within that run)."""
    runs = [j for j in meta if any(prec(r) != "fp32" for r in j["results"])]
    if not runs:
        return
    print("\n### bf16 beside fp32\n")
    print("Times are medians over rounds (ms, the measure's unit); `(x N)` after a bf16 time is that side's fp32 time / its bf16 "
          "time (per round, then the median): above 1, bf16 is faster. The last columns are the peer/fbt speedups in each "
          "precision. fbt bf16: `--precision bf16` (bf16 operands, fp32 accumulation); peer bf16: torch.autocast(cpu, bfloat16).\n")
    for j in runs:
        peers = [p for p in all_peers if p in j["settings"].get("peer_variants", all_peers)]  # the run's own variants
        impls = ["fbt"] + peers
        print(f"From `{j['_dir']}` ({j['date']}).\n")
        cpu_header([j["_cpu"]])
        head = "| config | threads | measure | unit |"
        sep = "|---|---:|---|---|"
        for i in impls:
            head += f" {i} fp32 | {i} bf16 (x fp32/bf16) |"
            sep += "---:|---:|"
        for p in peers:
            head += f" {p}/fbt fp32 | {p}/fbt bf16 |"
            sep += "---:|---:|"
        print(head)
        print(sep)
        by = {(r["config"], r["threads"], r["measure"], prec(r)): r for r in j["results"]}
        for (cfg, th, m, pr), r in by.items():
            if pr == "fp32":
                continue
            base = by.get((cfg, th, m, "fp32"), {"impls": {}})
            line = f"| {cfg} | {th} | {m} | {r['unit']} |"
            for i in impls:
                a, b = base["impls"].get(i), r["impls"].get(i)
                na = i == "torch.compile" and m == "sgemm"
                gain = f" (x {b['vs_fp32']:.2f})" if b and "vs_fp32" in b else ""
                line += " n/a | n/a |" if na else f" {fmt_ms(a['median_ms']) if a else '-'} | {fmt_ms(b['median_ms']) + gain if b else '-'} |"
            for p in peers:
                a, b = base["impls"].get(p), r["impls"].get(p)
                na = p == "torch.compile" and m == "sgemm"
                sp = lambda s: f"{s['speedup']:.2f}x" if s and "speedup" in s else "-"
                line += " n/a | n/a |" if na else f" {sp(a)} | {sp(b)} |"
            print(line)
        print()


def main():
    args = sys.argv[1:]
    soft = None
    if "--soft" in args:
        i = args.index("--soft")
        soft = args[i + 1]
        del args[i : i + 2]
    peak = None
    if "--peak" in args:  # bench_kernels --benchmark_filter=BM_Peak --benchmark_format=json: the core's clock and peak rates
        i = args.index("--peak")
        with open(args[i + 1]) as f:
            peak = {b["name"]: b for b in json.load(f)["benchmarks"]}
        del args[i : i + 2]
    rows, meta = load(args)
    peers = ["torch", "torch.compile"]
    order = {"fp32": 0, "bf16": 1}
    print("### Side by side\n")
    cpu_header(r["_cpu"] for r in rows.values())
    print("| config | threads | measure | precision | unit | fbt median [p25-p75] | peer | peer median [p25-p75] | speedup peer/fbt (range) | peak RSS MB fbt / peer |")
    print("|---|---:|---|---|---|---:|---|---:|---:|---:|")
    later = False
    for (cfg, th, m, pr), r in sorted(rows.items(), key=lambda kv: (kv[0][0] != "tiny", kv[0][1], kv[0][2], order.get(kv[0][3], 9))):
        f = r["impls"].get("fbt")
        fcell = f"{fmt_ms(f['median_ms'])} [{fmt_ms(f['p25_ms'])}-{fmt_ms(f['p75_ms'])}]" if f else "-"
        for p in peers:
            if p not in r["impls"]:
                continue
            q = r["impls"][p]
            rng = q.get("speedup_rounds") or [q.get("speedup", float("nan"))]
            sp = f"**{q['speedup']:.2f}x** ({min(rng):.2f}-{max(rng):.2f})" if "speedup" in q else "-"
            other = q.get("_dir", r["_dir"]) != r["_dir"]
            later |= other
            print(f"| {cfg} | {th} | {m} | {pr} | {r['unit']} | {fcell} | {p}{' †' if other else ''} | "
                  f"{fmt_ms(q['median_ms'])} [{fmt_ms(q['p25_ms'])}-{fmt_ms(q['p75_ms'])}] | {sp} | "
                  f"{f['peak_rss_mb'] if f else float('nan'):.0f} / {q['peak_rss_mb']:.0f} |")

    if later:
        print("\n† the peer from a later results directory than the fbt column: its speedup is against that run's own fbt time.")

    def get(cfg, th, m, impl="fbt", pr="fp32"):
        r = rows.get((cfg, th, m, pr))
        return r["impls"].get(impl) if r else None

    bf16_table(meta, peers)

    print("\n### Targets\n")
    cpu_header(r["_cpu"] for k, r in rows.items() if k[3] == "fp32")
    print("| target | config | threads | measured | met |")
    print("|---|---|---:|---|---|")
    # every training step kind >= 1.5x eager torch and >= 1.2x torch.compile (fp32); in bf16 >= 2x eager
    # torch autocast and >= 1.3x torch.compile under autocast (set for AMX CPUs)
    goals = {("fp32", "torch"): 1.5, ("fp32", "torch.compile"): 1.2, ("bf16", "torch"): 2.0, ("bf16", "torch.compile"): 1.3}
    for m in ["train", "kpass3", "kpass3_g1"]:
        for (pr, p), goal in goals.items():
            for cfg in ["tiny", "small"]:
                for th in [1, 2]:
                    t = get(cfg, th, m, p, pr=pr)
                    if t and "speedup" in t:
                        rng = t.get("speedup_rounds") or [t["speedup"]]
                        what = f"{m} step ({pr}) >= {goal:g}x the tokens/s of {p}{' (autocast bf16)' if pr == 'bf16' else ''}"
                        print(f"| {what} | {cfg} | {th} | {t['speedup']:.2f}x (range {min(rng):.2f}-{max(rng):.2f}) | {'yes' if t['speedup'] >= goal else 'NO'} |")
    for cfg in ["tiny", "small"]:
        for th in [1, 2]:
            s, tr = get(cfg, 1, "sgemm"), get(cfg, th, "train")  # the ceiling is the 1-thread SGEMM, x threads
            if s and tr:
                ceil = th * 2 * 1024**3 / (s["median_ms"] / 1e3) / 1e9
                share = tr["gflops"] / ceil
                goal = " (target >= 80%)" if (cfg, th) == ("small", 1) else ""
                print(f"| train step GFLOP/s as a share of the SGEMM ceiling (threads x the 1-thread 1024^3 SGEMM){goal} | {cfg} | {th} | {tr['gflops']:.1f} of {ceil:.0f} GFLOP/s = {100 * share:.1f}% | "
                      f"{('yes' if share >= 0.8 else 'NO') if goal else '-'} |")
            s, tr = get(cfg, 1, "sgemm", pr="bf16"), get(cfg, th, "train", pr="bf16")  # the same in bf16 (no target)
            if s and tr:
                ceil = th * 2 * 1024**3 / (s["median_ms"] / 1e3) / 1e9
                print(f"| bf16 train step GFLOP/s as a share of the bf16 1024^3 product (threads x 1 thread) | {cfg} | {th} | "
                      f"{tr['gflops']:.1f} of {ceil:.0f} GFLOP/s = {100 * tr['gflops'] / ceil:.1f}% | - |")
    if peak:  # each step's GFLOP/s against the core's measured peak (x threads) and clock
        def rate(name, key):  # the median over repetitions when bench_kernels ran several
            return (peak.get(name + "_median") or peak.get(name) or {}).get(key)
        ghz = rate("BM_Peak/clock", "GHz")
        for pr, name in (("fp32", "BM_Peak/fp32_fma"), ("bf16", "BM_Peak/bf16_dot")):
            pk = rate(name, "GFLOP/s")
            if not pk:
                continue
            per = f" = {pk / ghz:.0f} FLOP/cycle x {ghz:.2f} GHz" if ghz else ""
            for m in ["train", "kpass3", "kpass3_g1"]:
                for cfg in ["tiny", "small"]:
                    for th in [1, 2]:
                        t = get(cfg, th, m, pr=pr)
                        if t and t.get("gflops"):
                            print(f"| {m} step ({pr}): share of the core's {pr} peak x threads ({name}: {pk:.0f} GFLOP/s{per}) | "
                                  f"{cfg} | {th} | {t['gflops']:.1f} of {th * pk:.0f} GFLOP/s = {100 * t['gflops'] / (th * pk):.1f}% | - |")
    for cfg in ["tiny", "small"]:
        for th in [1, 2]:
            k1 = get(cfg, th, "fbt_k1")
            for K in (2, 3):
                kk = get(cfg, th, f"kpass{K}")
                if k1 and kk:
                    ratio = kk["median_ms"] / (K * k1["median_ms"])
                    print(f"| K = {K} step within 5% of {K} single-pass steps (no detach) | {cfg} | {th} | {fmt_ms(kk['median_ms'])} ms vs {K} x {fmt_ms(k1['median_ms'])} ms: {ratio:.3f} | {'yes' if ratio <= 1.05 else 'NO'} |")
            g1, fw = get(cfg, th, "kpass3_g1"), get(cfg, th, "forward")
            if k1 and g1 and fw:
                ratio = g1["median_ms"] / (2 * fw["median_ms"] + k1["median_ms"])
                print(f"| K = 3, grad_passes = 1 within 10% of 2 forwards + one step | {cfg} | {th} | {fmt_ms(g1['median_ms'])} ms vs 2 x {fmt_ms(fw['median_ms'])} + {fmt_ms(k1['median_ms'])} ms: {ratio:.3f} | {'yes' if ratio <= 1.10 else 'NO'} |")
    for cfg in ["tiny", "small"]:
        for ctx in (128, 1024):
            for mode in ("standard", "soft"):
                for p in peers:
                    q = get(cfg, 1, f"decode_{mode}_{ctx}", p)
                    if q and "speedup" in q:
                        lat = 1 / q["speedup"]
                        print(f"| KV-cached decode latency <= 0.5x the peer's ({p}) | {cfg} | 1 | {mode}, context {ctx}: {lat:.2f}x | {'yes' if lat <= 0.5 else 'NO'} |")
    worst = None
    for (cfg, th, m, pr), r in rows.items():
        for p in peers:
            if p in r["impls"] and "fbt" in r["impls"] and m != "sgemm" and pr == "fp32":
                ratio = r["impls"]["fbt"]["peak_rss_mb"] / r["impls"][p]["peak_rss_mb"]
                if worst is None or ratio > worst[0]:
                    worst = (ratio, cfg, th, m, p)
    if worst:
        print(f"| peak memory <= the peer's for the same step (worst case over all measures) | {worst[1]} | {worst[2]} | {worst[3]}: fbt/{worst[4]} = {worst[0]:.2f} | {'yes' if worst[0] <= 1 else 'NO'} |")
    if soft:
        soft_overhead(soft)
    for m in meta:
        pc = m.get("peer_check")
        pc = pc.get("summary", "") if isinstance(pc, dict) else (pc or "not run in this invocation")
        print(f"\nRun: `{m['command']}` ({m['date']}); peer check: {pc}")


if __name__ == "__main__":
    main()
