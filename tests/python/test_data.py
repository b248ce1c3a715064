"""fbt.data (train/run_plan.hpp): the batches, pass plan and rates of a run, listed without training, are what
fbt.train trains on: K, lr and matrix_lr of every step equal train.jsonl's (grad_accum 2, jitter and uniform prefixes,
so the schedule generator's draws between steps are counted), and the first step's loss is the initial model's loss
on the listed micro-batches; text, token and SFT files give batches of their kind; eval windows; task examples."""
import json

import numpy as np
import pytest

import fbt
from conftest import TINY

MODEL = {k: v for k, v in TINY.items() if k != "max_position_embeddings"}
RUN = dict(MODEL, data="task:addition", steps=10, batch_size=3, seq_len=48, grad_accum=2, feedback_start=0.2, K_max=3,
           pass_mix="2:0.5,3:0.5", sigma=0.05, prefix="uniform", eval_every=0, threads=1, warmup_steps=2, optimizer="normuon",
           lr_schedule="wsd", cooldown_z_loss=1e-4, seed=11, progress=False)


def test_the_plan_is_the_run(tmp_path):
    out = tmp_path / "run"
    fbt.train(out_dir=str(out), verbose=False, **RUN)
    lines = [json.loads(l) for l in open(out / "train.jsonl")]
    steps = list(fbt.data.batches(**RUN))
    assert len(steps) == len(lines) == 10
    assert [s["K"] for s in steps] == [l["K"] for l in lines] and len({s["K"] for s in steps}) > 1
    for s, l in zip(steps, lines):
        assert s["step"] == l["step"]
        assert s["lr"] == pytest.approx(l["lr"], rel=1e-12) and s["matrix_lr"] == pytest.approx(l["matrix_lr"], rel=1e-12)
        assert s["tokens"].shape == (2, 3, 48) and s["prefix"].shape == (s["K"], 3)
    assert [s["z_loss"] for s in steps][-1] == 1e-4 and steps[0]["z_loss"] == 0.0, "the cooldown's z-loss"
    assert [s["K"] for s in fbt.data.plan(**RUN)] == [s["K"] for s in steps], "plan() draws the same"
    # the data: step 0 is plain (feedback from 20%), its loss the initial model's on the two micro-batches
    rp = fbt.data.RunPlan(**RUN)
    m = fbt.Model(rp.model_config, seed=rp.seed)
    s0 = steps[0]
    assert s0["K"] == 1
    loss = np.mean([fbt.multipass_step(m, s0["tokens"][a], s0["targets"][a], K=1, doc_starts=s0["doc_starts"][a], backward=False)[0]
                    for a in range(2)])
    assert loss == pytest.approx(lines[0]["loss"][0], rel=1e-5)
    other = list(fbt.data.batches(dict(RUN, seed=12), limit=1))[0]
    assert not np.array_equal(other["tokens"], s0["tokens"]), "another seed, other batches"


def test_files_of_every_kind(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("\n\n".join("paragraph %d about nothing much at all" % i for i in range(200)))
    b = next(fbt.data.batches(dict(MODEL, data=str(text), steps=3, batch_size=2, seq_len=32, doc_split="blank_line")))
    assert b["tokens"].shape == (1, 2, 32) and b["tokens"].max() <= 256 and b["tokens"].dtype == np.int32
    tokens = tmp_path / "t.npy"
    np.save(tokens, (np.arange(5000) % 97).astype(np.uint16))
    b = next(fbt.data.batches(dict(MODEL, vocab_size=100, data=str(tokens), steps=3, batch_size=2, seq_len=32)))
    assert b["tokens"].max() < 97 and np.array_equal(b["targets"][0, 0, :-1], b["tokens"][0, 0, 1:])
    sft = tmp_path / "s.jsonl"
    sft.write_text("".join(json.dumps({"prompt": "q%d?" % i, "response": " a%d" % i}) + "\n" for i in range(50)))
    b = next(fbt.data.batches(dict(MODEL, data=str(sft), steps=3, batch_size=2, seq_len=32)))
    assert (b["targets"] == -1).any() and (b["targets"] >= 0).any(), "SFT: no loss on the prompts"
    w = list(fbt.data.eval_windows(dict(MODEL, data=str(text), steps=3, seq_len=32, doc_split="blank_line"), n=2))
    assert len(w) == 2 and w[0]["tokens"].shape == (32,)


def test_task_examples_and_refusals():
    ex = fbt.data.task_examples("multihop", n=3, difficulty=2)
    assert len(ex) == 3 and ex[0]["prompt"].endswith("?\n") and ex[0]["solution"].endswith("#### " + ex[0]["answer"] + "\n")
    assert fbt.data.task_examples("multihop", n=3, difficulty=2) == ex, "the evaluation's problems: deterministic"
    with pytest.raises(ValueError, match="batch_size"):
        fbt.data.RunPlan(dict(RUN, batch_size=0))
    with pytest.raises(ValueError, match="task"):
        fbt.data.task_examples("nope")
    p = fbt.data.RunPlan(dict(RUN, steps=1))
    p.next(False)
    with pytest.raises(StopIteration):
        p.next()
