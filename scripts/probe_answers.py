#!/usr/bin/env python3
"""probe_answers.py: greedy answers of a model trained on a probing task (docs/probing.md), per prefill.

    python3 scripts/probe_answers.py CHECKPOINT completion|delayed_memory N [--fbt build/tools/fbt]

Draws N prompts (Python's random.Random(7); the templates of data/probe_tasks.hpp with 8 null lines) and
runs `fbt sample --temperature 0` on each under `standard` and `soft/prefill=recurrent`; a generation is
right when it starts with the label. Prints one line per mode: right / N.
"""
import argparse
import random
import subprocess

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("checkpoint")
ap.add_argument("task", choices=["completion", "delayed_memory"])
ap.add_argument("n", type=int)
ap.add_argument("--fbt", default="build/tools/fbt")
a = ap.parse_args()
rng = random.Random(7)


def item():
    if a.task == "completion":
        x = rng.randrange(20)
        y = (x + 1 + rng.randrange(19)) % 20
        r, c = rng.choice([(x, x), (x, y), (y, x), (y, y)])
        return (f"required = {r}\ncompleted = {c}\nscratch = {rng.randrange(10)}\n" + "scratch += 0\n" * 8 + "Status:",
                "done" if r == c else "more")
    s = rng.randrange(2)
    return (f"state = {s}\nscratch = {rng.randrange(2)}\n" + "".join(f"scratch ^= {rng.randrange(2)}\n" for _ in range(6)) +
            "scratch += 0\n" * 8 + "# final state:", ["zero", "one"][s])


items = [item() for _ in range(a.n)]
for mode in ["standard", "soft/prefill=recurrent"]:
    ok = 0
    for p, lab in items:
        out = subprocess.run([a.fbt, "sample", "--checkpoint", a.checkpoint, "--prompt", p, "--mode", mode, "--temperature", "0",
                              "--max_new_tokens", "6"], capture_output=True, text=True).stdout
        gen = out.split(p, 1)[1] if p in out else ""
        ok += gen.strip().startswith(lab)
    print(f"{a.checkpoint} {mode}: {ok}/{a.n} greedy answers right")
