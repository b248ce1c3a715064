#!/usr/bin/env python3
"""latest_write_items.py: latest-write probe items with two labels, to tell a register lookup from a shortcut
(docs/EXPERIMENTS.md section 14.1; issue 48).

    python3 scripts/latest_write_items.py OUT_DIR [--writes W] [--groups G] [--seed S]
    python3 scripts/latest_write_items.py --self-test

Writes OUT_DIR/true_W<W>.jsonl and OUT_DIR/majority_W<W>.jsonl for `fbt probe --items`: the App. F latest-write
prompts (m = 8 registers, each written W times in a random order with fair bits, scratch, 8 null lines, the query;
data/probe_tasks.hpp's template byte for byte), one group per schedule with its complement and one query per
register, labelled either with the true answer (the last value written to the queried register) or with the
majority of all 8 W written values (items whose values tie are left out of both files, so the two sets hold the
same prompts). A model that reads the majority at its probe position but not the true label has learned the
shortcut "most writes were ones", not the lookup. The shortcut alone answers right as often as the two labels
agree (printed: about 64%, 60% and 57% over all items at W = 1, 2, 4, a little more on the untied items kept).
"""
import json
import math
import os
import random
import sys
import tempfile


def prompt(schedule, c, q, nulls=8):
    p = "".join("r%d = %d\n" % (r, v) for r, v in schedule)
    p += "scratch = %d\n" % c + "scratch += 0\n" * nulls
    return p + "query = r%d\nValue:" % q


def items(W, groups, seed, m=8):
    rng = random.Random(seed)
    out = []
    for g in range(groups):
        regs = [r for r in range(m) for _ in range(W)]
        rng.shuffle(regs)
        vals = [rng.randrange(2) for _ in regs]
        c = rng.randrange(10)
        for flip in (0, 1):
            sched = [(r, v ^ flip) for r, v in zip(regs, vals)]
            ones = sum(v for _, v in sched)
            if 2 * ones == len(sched):
                continue  # a tie: no majority
            maj = "one" if 2 * ones > len(sched) else "zero"
            for q in range(m):
                last = [v for r, v in sched if r == q][-1]
                out.append({"text": prompt(sched, c, q), "true": "one" if last else "zero", "majority": maj, "group": g})
    return out


def shortcut_accuracy(W, m=8):
    """P(the majority of all m W values equals the queried register's last value), ties broken at random."""
    n = m * W
    return sum(math.comb(n - 1, k) for k in range(n // 2, n)) / 2 ** (n - 1) + 0.5 * math.comb(n - 1, n // 2 - 1) / 2 ** (n - 1)


def main(argv):
    if len(argv) >= 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out, W, groups, seed = argv[1], 2, 64, 1
    i = 2
    while i + 1 < len(argv):
        if argv[i] == "--writes":
            W = int(argv[i + 1])
        elif argv[i] == "--groups":
            groups = int(argv[i + 1])
        elif argv[i] == "--seed":
            seed = int(argv[i + 1])
        else:
            print("latest_write_items.py: unknown argument %r" % argv[i], file=sys.stderr)
            return 2
        i += 2
    os.makedirs(out, exist_ok=True)
    its = items(W, groups, seed)
    for label in ("true", "majority"):
        with open(os.path.join(out, "%s_W%d.jsonl" % (label, W)), "w") as fh:
            for it in its:
                fh.write(json.dumps({"text": it["text"], "label": it[label], "group": it["group"]}) + "\n")
    agree = sum(it["true"] == it["majority"] for it in its) / len(its)
    print("W=%d: %d items (%d groups, ties left out); the majority label equals the true one on %.1f%% of them "
          "(expected over all items, ties at random: %.1f%%)" % (W, len(its), groups, 100 * agree, 100 * shortcut_accuracy(W)))
    return 0


def self_test():
    p = prompt([(0, 1), (1, 0)], 3, 1, nulls=1)
    assert p == "r0 = 1\nr1 = 0\nscratch = 3\nscratch += 0\nquery = r1\nValue:", p
    its = items(2, 50, 7)
    for it in its:
        lines = it["text"].split("\n")
        writes = [l for l in lines if l.startswith("r")]
        assert len(writes) == 16
        q = lines[-2].split("= r")[1]
        last = [l for l in writes if l.startswith("r%s " % q)][-1][-1]
        assert it["true"] == ("one" if last == "1" else "zero")
        ones = sum(l[-1] == "1" for l in writes)
        assert ones != 8 and it["majority"] == ("one" if ones > 8 else "zero")
    assert abs(shortcut_accuracy(2) - 0.5982) < 1e-3 and abs(shortcut_accuracy(1) - 0.6367) < 1e-3
    with tempfile.TemporaryDirectory() as t:
        assert main(["x", t, "--writes", "1", "--groups", "4"]) == 0
        assert os.path.exists(os.path.join(t, "majority_W1.jsonl"))
    print("latest_write_items.py self-test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
