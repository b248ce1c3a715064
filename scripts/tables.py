#!/usr/bin/env python3
"""tables.py: markdown tables of an `fbt ablate` grid's results (docs/EXPERIMENTS.md).

    python3 scripts/tables.py OUT_DIR --kind runs|tasks|contraction

  runs   one row per configuration (seeds averaged, min..max when several): token-equivalent compute,
         per-pass validation losses (pass k = fused(k-1) decoding), the token-by-token losses (standard,
         and soft = true feedback), the contraction monitor's L(k_max) and delta_k_max, decode ms/token.
  contraction  stability (spec sections 3 and 6): every full-bandwidth run's contraction monitor at its
         final checkpoint, L(k) and delta_k = rms(H_k - H_{k-1}) at k = 1, 2, 3, 10, 30.
  tasks  built-in tasks: per task, model and decoding mode, greedy accuracy and median trace length at
         each problem length (1x, 2x, 4x the training length), seeds averaged.

Pure Python. Reads OUT_DIR/<run>/result.json as `fbt ablate` writes it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid_results import load_results  # noqa: E402


def config_key(r: dict) -> str:
    """The run's name without its seed: what the seeds average over."""
    return "+".join(p for p in r["name"].split("+") if not p.startswith("seed="))


def fmt(vals: list, f: str = "{:.4f}") -> str:
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    m = sum(vals) / len(vals)
    s = f.format(m)
    if len(vals) > 1 and max(vals) != min(vals):
        s += " (" + f.format(min(vals)) + ".." + f.format(max(vals)) + ")"
    return s


def runs_table(res: list) -> None:
    groups = {}
    for r in res:
        groups.setdefault(config_key(r), []).append(r)
    kmax = max(len(r.get("eval", {}).get("val_loss", [])) for r in res)
    print("| run | seeds | compute / tokens | " + " | ".join(f"pass {k} loss" for k in range(1, kmax + 1)) +
          " | token-by-token standard | token-by-token soft | contraction L(k_max) | delta_k_max | decode ms/token std / soft |")
    print("|---|---:|---:|" + "---:|" * kmax + "---:|---:|---:|---:|---:|")
    for key, rs in groups.items():
        failed = [r for r in rs if r.get("status") != "done"]
        if failed:
            print(f"| {key} | {len(rs)} | failed: {failed[0].get('error', '?')[:120]} |" + " |" * (kmax + 5))
            continue
        ev = [r["eval"] for r in rs]
        cells = [fmt([e["val_loss"][k] if k < len(e["val_loss"]) else None for e in ev]) for k in range(kmax)]
        c = [e.get("contraction") for e in ev]
        lk = fmt([x["loss"][-1] if x else None for x in c])
        dk = fmt([x["delta"][-1] if x else None for x in c], "{:.2e}")
        ms = [r.get("decode_ms_per_token", {}) for r in rs]
        dec = fmt([m.get("standard") for m in ms], "{:.3f}") + " / " + fmt([m.get("soft") for m in ms], "{:.3f}")
        print(f"| {key} | {len(rs)} | {fmt([r['compute_tokens'] / r['tokens'] for r in rs], '{:.3f}')} | " + " | ".join(cells) +
              f" | {fmt([e.get('seq_loss_standard') for e in ev])} | {fmt([e.get('seq_loss_soft') for e in ev])} | {lk} | {dk} | {dec} |")


def tasks_table(res: list) -> None:
    groups = {}
    for r in res:
        if r.get("status") == "done" and r.get("tasks"):
            groups.setdefault(config_key(r), []).append(r)
    if not groups:
        raise SystemExit("tables.py: no run has task results (built-in tasks with task_examples > 0)")
    lengths = sorted({t["length_mult"] for rs in groups.values() for r in rs for t in r["tasks"].values()})
    print("| run | seeds | mode | " + " | ".join(f"accuracy {m}x | median trace {m}x" for m in lengths) + " |")
    print("|---|---:|---|" + "---:|---:|" * len(lengths))
    for key, rs in groups.items():
        order = ["standard", "soft", "fused(1)", "fused(2)"]
        modes = sorted({t["mode"] for t in rs[0]["tasks"].values()}, key=lambda m: (order.index(m) if m in order else 99, m))
        for mode in modes:
            cells = []
            for m in lengths:
                k = f"{mode}@{m}x"
                cells.append(fmt([r["tasks"][k]["accuracy"] if k in r["tasks"] else None for r in rs], "{:.2f}"))
                cells.append(fmt([r["tasks"][k]["median_trace"] if k in r["tasks"] else None for r in rs], "{:.1f}"))
            print(f"| {key} | {len(rs)} | {mode} | " + " | ".join(cells) + " |")


def contraction_table(res: list) -> None:
    ks = [1, 2, 3, 10, 30]
    print("| run | pass mix | " + " | ".join(f"L({k})" for k in ks) + " | " + " | ".join(f"delta_{k}" for k in ks[1:]) + " |")
    print("|---|---|" + "---:|" * (2 * len(ks) - 1))
    for r in res:
        c = (r.get("eval") or {}).get("contraction")
        if r.get("status") != "done" or not c:
            continue
        L = [f"{c['loss'][k - 1]:.4f}" if k <= len(c["loss"]) else "-" for k in ks]
        d = [f"{c['delta'][k - 1]:.2e}" if k <= len(c["delta"]) else "-" for k in ks[1:]]
        print(f"| {r['name']} | {r['config']['pass_mix']} | " + " | ".join(L) + " | " + " | ".join(d) + " |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--kind", choices=["runs", "tasks", "contraction"], default="runs")
    a = ap.parse_args(argv)
    res = load_results(a.out_dir, "tables.py")
    {"runs": runs_table, "tasks": tasks_table, "contraction": contraction_table}[a.kind](res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
