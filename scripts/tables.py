#!/usr/bin/env python3
"""tables.py: markdown tables of an `fbt ablate` grid's results (docs/EXPERIMENTS.md).

    python3 scripts/tables.py OUT_DIR --kind runs|tasks|contraction|positions|curve

  runs   one row per configuration (seeds averaged, min..max when several): token-equivalent compute,
         per-pass validation losses (pass k = fused(k-1) decoding), the token-by-token losses (standard,
         and soft = true feedback), the contraction monitor's L(k_max) and delta_k_max, decode ms/token.
  contraction  stability (spec sections 3 and 6): every full-bandwidth run's contraction monitor at its
         final checkpoint, L(k) and delta_k = rms(H_k - H_{k-1}) at k = 1, 2, 3, 10, 30 (and 100, 1000
         when the monitor ran that far).
  positions  loss by position within a document (eval.loss_by_position), per configuration (seeds
         averaged, weighted by count): each pass (1 = plain, 2 = fused(1), 3 = fused(2)), token by token
         (standard, soft) and the optimum where the data knows it, over position buckets.
  curve  the evaluations over training (each run's eval.jsonl, written every eval_every steps), per
         configuration (seeds averaged, min..max when several): step, tokens, per-pass validation
         losses, the token-by-token losses, and the two gaps that say whether feedback helps yet:
         fused(1) minus plain (pass 2 - pass 1) and soft minus standard.
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


def by_config(res: list) -> dict:
    """The runs grouped by configuration (config_key), in the order first seen."""
    groups = {}
    for r in res:
        groups.setdefault(config_key(r), []).append(r)
    return groups


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
    groups = by_config(res)
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


def positions_table(res: list) -> None:
    buckets = [(0, 1), (1, 4), (4, 8), (8, 16), (16, 32), (32, 10 ** 9)]
    names = ["0", "1-3", "4-7", "8-15", "16-31", "32+"]
    groups = {}
    for r in res:
        bp = (r.get("eval") or {}).get("loss_by_position")
        if r.get("status") == "done" and bp:
            groups.setdefault(config_key(r), []).append(bp)
    print("| configuration | loss | " + " | ".join(f"pos {n}" for n in names) + " |")
    print("|---|---|" + "---:|" * len(names))

    def bucketed(bps, series, count_key):
        cells = []
        for lo, hi in buckets:
            num = den = 0.0
            for bp in bps:
                vals, cnt = bp.get(series), bp.get(count_key)
                if not vals or not cnt:
                    continue
                for i in range(lo, min(hi, len(vals))):
                    if vals[i] is not None and cnt[i]:
                        num += vals[i] * cnt[i]
                        den += cnt[i]
            cells.append(f"{num / den:.4f}" if den else "-")
        return cells

    for key, bps in groups.items():
        rows = []
        npass = max(len(bp.get("pass", [])) for bp in bps)
        for j in range(npass):
            flat = [dict(bp, series=bp["pass"][j]) for bp in bps if j < len(bp.get("pass", []))]
            rows.append((f"pass {j + 1}" + (" (plain)" if j == 0 else f" (fused({j}))"), bucketed(flat, "series", "count")))
        for series, label in (("seq_standard", "token by token, standard"), ("seq_soft", "token by token, soft")):
            if any(bp.get(series) for bp in bps):
                rows.append((label, bucketed(bps, series, "seq_count")))
        if any(bp.get("optimal") for bp in bps):
            rows.append(("optimum", bucketed(bps, "optimal", "count")))
        for i, (label, cells) in enumerate(rows):
            print(f"| {key if i == 0 else ''} | {label} | " + " | ".join(cells) + " |")


def contraction_table(res: list) -> None:
    longest = max([len(((r.get("eval") or {}).get("contraction") or {}).get("loss", [])) for r in res] + [0])
    ks = [k for k in [1, 2, 3, 10, 30, 100, 1000] if k <= max(longest, 30)]
    print("| run | pass mix | " + " | ".join(f"L({k})" for k in ks) + " | " + " | ".join(f"delta_{k}" for k in ks[1:]) + " |")
    print("|---|---|" + "---:|" * (2 * len(ks) - 1))
    for r in res:
        c = (r.get("eval") or {}).get("contraction")
        if r.get("status") != "done" or not c:
            continue
        L = [f"{c['loss'][k - 1]:.4f}" if k <= len(c["loss"]) else "-" for k in ks]
        d = [f"{c['delta'][k - 1]:.2e}" if k <= len(c["delta"]) else "-" for k in ks[1:]]
        print(f"| {r['name']} | {r['config']['pass_mix']} | " + " | ".join(L) + " | " + " | ".join(d) + " |")


def read_evals(out_dir: str, name: str) -> list:
    """The run's evaluations over training (OUT_DIR/<run>/eval.jsonl), in step order."""
    p = os.path.join(out_dir, name, "eval.jsonl")
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return sorted((json.loads(line) for line in f if line.strip()), key=lambda e: e["step"])


def curve_table(res: list, out_dir: str) -> None:
    for key, rs in by_config(res).items():
        evals = [read_evals(out_dir, r["name"]) for r in rs]
        evals = [e for e in evals if e]
        if not evals:
            print(f"{key}: no eval.jsonl\n")
            continue
        kmax = max(len(e.get("val_loss", [])) for ev in evals for e in ev)
        steps = sorted({e["step"] for ev in evals for e in ev})
        print(f"### {key} ({len(evals)} seed{'s' if len(evals) > 1 else ''})\n")
        gap = " | fused(1) - plain | soft - standard" if kmax > 1 else ""
        print("| step | tokens | " + " | ".join(f"pass {k}" for k in range(1, kmax + 1)) +
              " | token-by-token standard | soft" + gap + " |")
        print("|---:|---:|" + "---:|" * kmax + "---:|---:|" + ("---:|---:|" if kmax > 1 else ""))
        for st in steps:
            at = [e for ev in evals for e in ev if e["step"] == st]
            vl = [e.get("val_loss", []) for e in at]
            cols = [fmt([v[k] if k < len(v) else None for v in vl]) for k in range(kmax)]
            std = [e.get("seq_loss_standard") for e in at]
            soft = [e.get("seq_loss_soft") for e in at]
            row = [str(st), f"{at[0].get('tokens', 0) / 1e6:.3g}M"] + cols + [fmt(std), fmt(soft)]
            if kmax > 1:
                row.append(fmt([v[1] - v[0] if len(v) > 1 else None for v in vl], "{:+.4f}"))
                row.append(fmt([b - a if a is not None and b is not None else None for a, b in zip(std, soft)], "{:+.4f}"))
            print("| " + " | ".join(row) + " |")
        print()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--kind", choices=["runs", "tasks", "contraction", "positions", "curve"], default="runs")
    a = ap.parse_args(argv)
    res = load_results(a.out_dir, "tables.py")
    if a.kind == "curve":
        curve_table(res, a.out_dir)
        return 0
    {"runs": runs_table, "tasks": tasks_table, "contraction": contraction_table, "positions": positions_table}[a.kind](res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
