#!/usr/bin/env python3
"""length_traces.py: what a model writes for additions longer than it was trained on (docs/EXPERIMENTS.md
section 12, length generalisation; issue 48).

    python3 scripts/length_traces.py TRACES.jsonl [TRACES.jsonl ...] [--json OUT] [--compare RUN_A RUN_B ...]
    python3 scripts/length_traces.py --self-test

TRACES.jsonl are `fbt eval --task_examples N --eval_lengths 1,2,4 --traces_out FILE` files ({"prompt", "response"}
lines, the greedy decodes of task:addition problems). Per file and operand length d (read off the prompt) it prints
the accuracy, the answer's length (digits written, against the true d or d + 1), the columns the trace works
through (full level: its "a+b=s cK" steps; compressed: its column sums; 0 for an answer-only solution), the share
of answers whose length is the trained operand length + 0/1 (the template), and the right-aligned digit
accuracy: the share of answers whose k lowest digits are right, for k = 1, 3 and d (a model that adds the low
columns right and stops writes the right low digits and too few high ones).

--compare RUN_A RUN_B (repeatable) compares two models on the same problems: the files named RUN_A+seed=S.traces.jsonl
and RUN_B+seed=S.traces.jsonl (fbt ablate's run names) are paired by seed and by prompt, and per operand length it
prints the problems, each model's right answers, b (right only under A), c (right only under B) and McNemar's exact
two-sided p (the seeds' pairs pooled: each is a pair of models trained with one seed).
"""
import json
import math
import os
import re
import statistics
import sys
import tempfile


def parse(prompt, response):
    m = re.match(r"(\d+)\+(\d+)=\?", prompt)
    if not m:
        return None
    a, b = m.group(1), m.group(2)
    truth = str(int(a) + int(b))
    ans = None
    if "#### " in response:
        tail = response.split("#### ", 1)[1]
        ans = tail.split("\n", 1)[0].strip() if "\n" in tail else None
    trace = response.split("#### ", 1)[0].strip() if "#### " in response else response.strip()
    if not trace:
        cols = 0
    elif "=" in trace:  # full: "2+9=11 c1; 7+5+1=13 c1; ..."
        cols = len([s for s in trace.split(";") if s.strip()])
    else:  # compressed: "11 13 8"
        cols = len(trace.split())
    return {"digits": len(a), "truth": truth, "answer": ans, "columns": cols, "level": "answer" if cols == 0 else ("full" if "=" in trace else "compressed")}


def low_digits_right(ans, truth, k):
    if ans is None or not ans.isdigit():
        return False
    k = min(k, len(truth))
    return len(ans) >= k and ans[-k:] == truth[-k:]


def summarise(path):
    rows = {}
    with open(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            j = json.loads(line)
            p = parse(j["prompt"], j["response"])
            if p:
                rows.setdefault(p["digits"], []).append(p)
    out = []
    for d, ps in sorted(rows.items()):
        n = len(ps)
        answered = [p for p in ps if p["answer"] is not None and p["answer"].isdigit()]
        traced = [p for p in ps if p["columns"] > 0]
        out.append({"digits": d, "n": n, "accuracy": sum(p["answer"] == p["truth"] for p in ps) / n,
                    "answer_digits": statistics.median(len(p["answer"]) for p in answered) if answered else None,
                    "answer_digits_max": max((len(p["answer"]) for p in answered), default=None),
                    "true_digits": statistics.median(len(p["truth"]) for p in ps),
                    "columns": statistics.median(p["columns"] for p in traced) if traced else None,
                    "columns_max": max((p["columns"] for p in traced), default=None), "traced": len(traced),
                    "low1": sum(low_digits_right(p["answer"], p["truth"], 1) for p in ps) / n,
                    "low3": sum(low_digits_right(p["answer"], p["truth"], 3) for p in ps) / n,
                    "lowd": sum(low_digits_right(p["answer"], p["truth"], d) for p in ps) / n})
    return out


def correctness(path):
    """{prompt: (right, digits)} of one traces file."""
    out = {}
    with open(path) as fh:
        for line in fh:
            if line.strip():
                j = json.loads(line)
                p = parse(j["prompt"], j["response"])
                if p:
                    out[j["prompt"]] = (p["answer"] == p["truth"], p["digits"])
    return out


def mcnemar_p(b, c):
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def compare(files, a, b):
    """Rows per operand length: the pairs of files a+seed=S / b+seed=S among files, paired by prompt."""
    by = {}
    for f in files:
        m = re.match(r"(.*)\+seed=(\d+)\.traces\.jsonl$", os.path.basename(f))
        if m:
            by[(m.group(1), m.group(2))] = f
    seeds = sorted(s for (run, s) in by if run == a and (b, s) in by)
    rows = {}
    for sd in seeds:
        ca, cb = correctness(by[(a, sd)]), correctness(by[(b, sd)])
        for prompt, (ra, d) in ca.items():
            if prompt not in cb:
                continue
            rb = cb[prompt][0]
            r = rows.setdefault(d, {"n": 0, "a": 0, "b": 0, "b_only": 0, "c_only": 0})
            r["n"] += 1
            r["a"] += ra
            r["b"] += rb
            r["b_only"] += ra and not rb
            r["c_only"] += rb and not ra
    for r in rows.values():
        r["p"] = mcnemar_p(r["b_only"], r["c_only"])
    return seeds, dict(sorted(rows.items()))


def fmt(x, f="%.2f"):
    return "-" if x is None else f % x


def main(argv):
    if len(argv) >= 2 and argv[1] == "--self-test":
        return self_test()
    files, json_out, pairs = [], None, []
    i = 1
    while i < len(argv):
        if argv[i] == "--json" and i + 1 < len(argv):
            json_out = argv[i + 1]; i += 2
        elif argv[i] == "--compare" and i + 2 < len(argv):
            pairs.append((argv[i + 1], argv[i + 2])); i += 3
        elif argv[i].startswith("-"):
            print("length_traces.py: unknown argument %r" % argv[i], file=sys.stderr)
            return 2
        else:
            files.append(argv[i]); i += 1
    if not files:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    allr = {}
    print("| traces | digits | problems | accuracy | answer digits: median (max) / true | trace columns: median (max), traced | lowest digit right | lowest 3 right | lowest d right |")
    print("|---|---:|---:|---:|---|---|---:|---:|---:|")
    for f in files:
        rs = summarise(f)
        allr[f] = rs
        for r in rs:
            print("| %s | %d | %d | %s | %s (%s) / %s | %s (%s), %d | %s | %s | %s |" % (
                os.path.basename(f), r["digits"], r["n"], fmt(r["accuracy"]), fmt(r["answer_digits"], "%g"), fmt(r["answer_digits_max"], "%d"),
                fmt(r["true_digits"], "%g"), fmt(r["columns"], "%g"), fmt(r["columns_max"], "%d"), r["traced"], fmt(r["low1"]), fmt(r["low3"]), fmt(r["lowd"])))
    comps = []
    for a, b in pairs:
        seeds, rows = compare(files, a, b)
        comps.append({"a": a, "b": b, "seeds": seeds, "rows": rows})
        print("\n%s (A) against %s (B), seeds %s, the same problems:\n" % (a, b, ", ".join(seeds) or "none"))
        print("| digits | pairs | A right | B right | b (A only) | c (B only) | McNemar p |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for d, r in rows.items():
            print("| %d | %d | %d | %d | %d | %d | %.3g |" % (d, r["n"], r["a"], r["b"], r["b_only"], r["c_only"], r["p"]))
    if json_out:
        with open(json_out, "w") as fh:
            json.dump({"files": allr, "compare": comps}, fh, indent=1)
    return 0


def self_test():
    p = parse("470366+162405=?\n", "#### 1156\n")
    assert p["digits"] == 6 and p["truth"] == "632771" and p["answer"] == "1156" and p["columns"] == 0 and p["level"] == "answer", p
    p = parse("996698+864599=?\n", "1+9+9=18 c1; 9+8+1=18 c1; 9+1+1=11 c1\n#### 1188\n")
    assert p["columns"] == 3 and p["level"] == "full" and p["answer"] == "1188", p
    p = parse("472+359=?\n", "11 13 8\n#### 831\n")
    assert p["columns"] == 3 and p["answer"] == p["truth"] == "831", p
    assert parse("472+359=?\n", "11 13")["answer"] is None  # no answer line
    assert low_digits_right("1831", "2831", 3) and not low_digits_right("1831", "2831", 4) and not low_digits_right(None, "1", 1)
    with tempfile.TemporaryDirectory() as t:
        f = os.path.join(t, "tr.jsonl")
        with open(f, "w") as fh:
            for prompt, resp in (("472+359=?\n", "11 13 8\n#### 831\n"), ("100+100=?\n", "#### 201\n"),
                                 ("470366+162405=?\n", "#### 2771\n")):
                fh.write(json.dumps({"prompt": prompt, "response": resp}) + "\n")
        rs = summarise(f)
        assert [r["digits"] for r in rs] == [3, 6], rs
        assert rs[0]["accuracy"] == 0.5 and rs[0]["low1"] == 0.5 and rs[0]["columns"] == 3 and rs[0]["traced"] == 1, rs[0]
        assert rs[1]["accuracy"] == 0 and rs[1]["low3"] == 1.0 and rs[1]["lowd"] == 0 and rs[1]["answer_digits"] == 4, rs[1]
        for run, resp in (("A", "11 13 8\n#### 831\n"), ("B", "#### 832\n")):
            for sd in ("1", "2"):
                with open(os.path.join(t, "%s+seed=%s.traces.jsonl" % (run, sd)), "w") as fh:
                    fh.write(json.dumps({"prompt": "472+359=?\n", "response": resp}) + "\n")
        seeds, rows = compare([os.path.join(t, "%s+seed=%s.traces.jsonl" % (r, sd)) for r in "AB" for sd in "12"], "A", "B")
        assert seeds == ["1", "2"] and rows[3] == {"n": 2, "a": 2, "b": 0, "b_only": 2, "c_only": 0, "p": 0.5}, rows
        assert mcnemar_p(9, 3) == 2 * sum(math.comb(12, i) for i in range(4)) / 2 ** 12
    print("length_traces.py self-test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
