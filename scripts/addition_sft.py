#!/usr/bin/env python3
"""Writes prompt/response JSONL (docs/file-formats.md, "SFT prompt/response JSONL") of the built-in addition
task (include/fbt/data/tasks.hpp, make_addition) at one verbosity level, for `fbt train --data FILE.jsonl`.

    python3 scripts/addition_sft.py --digits 3 --n 2000 --level full --seed 1 --out add_full.jsonl

The prompt and the solution are byte for byte the task's ("472+359=?\\n", "2+9=11 c1; ...\\n#### 831\\n");
the problems are drawn with Python's random (not fbt's Rng), so they are not the evaluation's problems.
Each line also carries "answer" (ignored by the reader)."""
import argparse
import json
import random


def addition(d, rng):
    a = str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(d - 1))
    b = str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(d - 1))
    steps, sums, rev, carry = [], [], [], 0
    for i in range(d - 1, -1, -1):
        x, y = int(a[i]), int(b[i])
        s = x + y + carry
        steps.append(f"{x}+{y}{'+1' if carry else ''}={s} c{s // 10}")
        sums.append(str(s))
        rev.append(str(s % 10))
        carry = s // 10
    if carry:
        rev.append("1")
    answer = "".join(reversed(rev))
    return a + "+" + b + "=?\n", "; ".join(steps), " ".join(sums), answer


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--digits", type=int, default=3)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--level", choices=["full", "compressed", "answer"], default="full")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    rng = random.Random(a.seed)
    with open(a.out, "w") as f:
        for _ in range(a.n):
            prompt, full, compressed, answer = addition(a.digits, rng)
            trace = {"full": full + "\n", "compressed": compressed + "\n", "answer": ""}[a.level]
            f.write(json.dumps({"prompt": prompt, "response": trace + "#### " + answer + "\n", "answer": answer}) + "\n")


if __name__ == "__main__":
    main()
