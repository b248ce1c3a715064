#!/usr/bin/env python3
"""cpu_info.py: the CPU a benchmark ran on, from `lscpu` and /proc/cpuinfo (plain Python 3, no torch).

    python3 benchmarks/cpu_info.py                 # the JSON object on stdout
    python3 benchmarks/cpu_info.py --json DIR/cpu.json --line   # write it, print the one-line summary
    python3 benchmarks/cpu_info.py --line-from DIR/cpu.json     # the summary of a saved record

Records: model name, vendor, family / model / stepping, microcode, hypervisor, the CPU count and the
topology (sockets, cores per socket, threads per core; the CPUs this process may run on), L1d / L1i /
L2 / L3 sizes (lscpu's text, e.g. "2 MiB (2 instances)"), the SIMD flags (every flag that starts with sse,
ssse, avx, fma, f16c, amx, plus vnni/bf16/fp16 ones) and the whole flag list, MemTotal, the kernel.
benchmarks/run_e2e.py writes it as cpu.json beside e2e.json; performance_report.py and regress.sh print
summary_line() above their tables. Every field may be missing (no lscpu, no /proc): the record says so.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

SIMD_PREFIXES = ("sse", "ssse", "avx", "fma", "f16c", "amx")
# shown in the one-line summary when present (the rest of simd_flags stays in the JSON)
KEY_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16",
             "amx_tile", "amx_bf16", "amx_int8", "amx_fp16")


def _lscpu():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30,
                             env=dict(os.environ, LC_ALL="C")).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    d = {}
    for line in out.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            d[k.strip()] = v.strip()
    return d


def _proc_cpuinfo():
    """The first processor's fields of /proc/cpuinfo, and the number of processors listed."""
    d, n = {}, 0
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, sep, v = line.partition(":")
                if not sep:
                    continue
                k = k.strip()
                if k == "processor":
                    n += 1
                if n == 1:
                    d.setdefault(k, v.strip())
    except OSError:
        pass
    return d, n


def collect():
    ls, (ci, nproc) = _lscpu(), _proc_cpuinfo()
    flags = (ls.get("Flags") or ci.get("flags") or "").split()
    simd = [f for f in flags if f.startswith(SIMD_PREFIXES) or any(s in f for s in ("vnni", "bf16", "fp16"))]
    info = {
        "model_name": ls.get("Model name") or ci.get("model name"),
        "vendor": ls.get("Vendor ID") or ci.get("vendor_id"),
        "family": ls.get("CPU family") or ci.get("cpu family"),
        "model": ls.get("Model") or ci.get("model"),
        "stepping": ls.get("Stepping") or ci.get("stepping"),
        "microcode": ci.get("microcode"),
        "hypervisor": ls.get("Hypervisor vendor"),
        "cpus": int(ls["CPU(s)"]) if ls.get("CPU(s)", "").isdigit() else (nproc or os.cpu_count()),
        "sockets": ls.get("Socket(s)"),
        "cores_per_socket": ls.get("Core(s) per socket") or ci.get("cpu cores"),
        "threads_per_core": ls.get("Thread(s) per core"),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "l1d": ls.get("L1d cache"),
        "l1i": ls.get("L1i cache"),
        "l2": ls.get("L2 cache"),
        "l3": ls.get("L3 cache"),
        "cache_size_cpuinfo": ci.get("cache size"),
        "mhz": ls.get("CPU max MHz") or ci.get("cpu MHz"),
        "simd_flags": simd,
        "flags": " ".join(flags),
        "kernel": platform.release(),
        "sources": [s for s, ok in (("lscpu", bool(ls)), ("/proc/cpuinfo", bool(ci))) if ok],
    }
    try:
        with open("/proc/meminfo") as f:
            info["mem_total"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("MemTotal")), None)
    except OSError:
        info["mem_total"] = None
    return info


def summary_line(info):
    """One line naming the CPU: model, CPU count and topology, caches, the key SIMD flags.

    Takes a collect() record or the older run_e2e.py "machine" record (lscpu keys: "Model name", "CPU(s)",
    "L1d cache", "Flags" with the avx/fma/amx flags only)."""
    if not info:
        return "CPU: not recorded"
    if "Model name" in info or "CPU(s)" in info:  # run_e2e.py's machine_info() before cpu.json existed
        info = {"model_name": info.get("Model name"), "cpus": info.get("CPU(s)"), "sockets": info.get("Socket(s)"),
                "cores_per_socket": info.get("Core(s) per socket"), "threads_per_core": info.get("Thread(s) per core"),
                "l1d": info.get("L1d cache"), "l2": info.get("L2 cache"), "l3": info.get("L3 cache"),
                "simd_flags": (info.get("Flags") or "").split(), "partial_flags": True}
    name = info.get("model_name") or "unknown model"
    if info.get("vendor") and info.get("family"):
        name += f" ({info['vendor']} family {info['family']} model {info.get('model', '?')})"
    topo = f"{info.get('cpus', '?')} CPUs"
    if info.get("sockets") and info.get("cores_per_socket"):
        topo += f" ({info['sockets']} socket(s) x {info['cores_per_socket']} cores x {info.get('threads_per_core', '?')} thread(s) per core)"
    caches = ", ".join(f"{k} {info[k.lower()]}" for k in ("L1d", "L2", "L3") if info.get(k.lower()))
    flags = set(info.get("simd_flags") or [])
    have = [f for f in KEY_FLAGS if f in flags]
    amx = "" if any(f.startswith("amx") for f in flags) else ", no AMX"
    simd = ("SIMD " + " ".join(have) if have else "no AVX2/AVX-512 flags recorded") + (amx if flags else "")
    hyp = f"; {info['hypervisor']} guest" if info.get("hypervisor") else ""
    return f"CPU: {name}, {topo}, {caches}; {simd}{hyp}"


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    if "--line-from" in args:
        i = args.index("--line-from")
        path = args[i + 1]
        with open(path) as f:
            print(summary_line(json.load(f)))
        return 0
    info = collect()
    if "--json" in args:
        i = args.index("--json")
        path = args[i + 1]
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(info, f, indent=1)
    if "--line" in args:
        print(summary_line(info))
    elif "--json" not in args:
        print(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
