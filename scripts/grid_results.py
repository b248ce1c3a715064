"""grid_results.py: reading the results of an `fbt ablate` grid (OUT_DIR/<run>/result.json), shared by
scripts/multiplier.py and scripts/tables.py."""
from __future__ import annotations

import json
import os
import sys


def load_results(out_dir: str, tool: str, done_only: bool = False) -> list:
    """Every run's result.json under out_dir, in name order. done_only: skip runs that did not finish
    (with a note on stderr naming the run and its error)."""
    if not os.path.isdir(out_dir):
        raise SystemExit(f"{tool}: {out_dir}: not a directory (give the out_dir of an fbt ablate grid)")
    res = []
    for name in sorted(os.listdir(out_dir)):
        p = os.path.join(out_dir, name, "result.json")
        if not os.path.exists(p):
            continue
        with open(p) as f:
            try:
                r = json.load(f)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{tool}: {p}: not valid JSON ({e})")
        if done_only and r.get("status") != "done":
            print(f"note: run {name} did not finish: {r.get('error', r.get('status'))}", file=sys.stderr)
            continue
        res.append(r)
    if not res:
        raise SystemExit(f"{tool}: {out_dir}: no result.json under it (run fbt ablate first)")
    return res
