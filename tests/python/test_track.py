"""fbt.track: a run's train.jsonl / eval.jsonl into TensorBoard event files (written by fbt itself, read back by its own
reader and, when installed, by TensorBoard's) or a W&B offline run (when wandb is installed; else a message naming it),
after the fact, live (follow) and from fbt.train(track=...)."""
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import fbt
import fbt.track as track

TINY = dict(data="task:running_sum", steps=12, batch_size=4, seq_len=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, intermediate_size=64, max_position_embeddings=64, feedback_start=0.25, warmup_steps=2, eval_every=6,
            eval_windows=2, seq_eval_windows=1, monitor_passes=3, progress=False)


def lines(path):
    return [json.loads(x) for x in open(path) if x.strip()]


def expected(run):
    """{(step, tag): value} the run's JSONL says, as float32 (what an event's simple_value holds)."""
    want = {}
    for name, prefix in (("train.jsonl", "train"), ("eval.jsonl", "eval")):
        if not os.path.exists(os.path.join(run, name)):
            continue
        for rec in lines(os.path.join(run, name)):
            for tag, v in track.scalars(rec, prefix).items():
                want[(rec["step"], tag)] = float(np.float32(v))
    return want


def events_of(logdir):
    files = [os.path.join(logdir, f) for f in os.listdir(logdir) if f.startswith("events.out.tfevents.")]
    assert len(files) == 1, files
    return {(s, t): v for s, t, v in track.read_events(files[0])}


def test_after_the_fact_live_and_from_train_give_the_same_events(tmp_path):
    run = str(tmp_path / "run")
    fbt.train(**TINY, out_dir=run, verbose=False, track="tensorboard", track_dir=str(tmp_path / "live"))
    want = expected(run)
    assert any(t == "train/loss/pass_2" for _, t in want) and any(t == "eval/val_loss/pass_3" for _, t in want)
    assert any(t == "train/gate_mean/pass_2" for _, t in want) and any(t == "train/tok_s" for _, t in want)
    assert events_of(str(tmp_path / "live")) == want, "fbt.train(track=...): every number of every line"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(fbt.__file__)) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "fbt.track", run, "--to", "tensorboard"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "lines of" in r.stdout
    tb_dir = os.path.join(run, "tensorboard")
    after = events_of(tb_dir)
    assert after == want, "python -m fbt.track: the same events"
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return  # TensorBoard's own reader is the extra check when it is installed
    acc = EventAccumulator(tb_dir)
    acc.Reload()
    got = {(e.step, tag): e.value for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)}
    assert got == want, "TensorBoard reads the same scalars"


def test_follow_logs_what_a_run_adds_until_it_is_idle(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    recs = [{"step": s, "K": 1, "loss": [2.0 - 0.1 * s], "lr": 1e-3} for s in range(5)]

    def writer():
        with open(run / "train.jsonl", "w") as f:
            for rec in recs:
                text = json.dumps(rec) + "\n"
                f.write(text[:5])  # a line written in two pieces: the reader waits for its end
                f.flush()
                time.sleep(0.05)
                f.write(text[5:])
                f.flush()
                time.sleep(0.05)

    th = threading.Thread(target=writer)
    th.start()
    w = track.TensorBoardWriter(str(tmp_path / "tb"))
    n = track.follow(str(run), track.Tracker(w), live=True, idle=1.0, poll=0.02)
    w.close()
    th.join()
    assert n == 5
    assert events_of(str(tmp_path / "tb")) == expected(str(run))


def test_refusals_name_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="expected tensorboard or wandb"):
        track.make_writer("mlflow", str(tmp_path))
    with pytest.raises(SystemExit, match="not a run directory"):
        track.follow(str(tmp_path / "nothing"), None)
    try:
        import wandb  # noqa: F401
    except ImportError:
        with pytest.raises(SystemExit, match="pip install wandb"):
            track.make_writer("wandb", str(tmp_path / "wb"))
        return
    os.environ.setdefault("WANDB_MODE", "offline")
    w = track.make_writer("wandb", str(tmp_path / "wb"), name="t")
    w.log(0, {"train/loss/pass_1": 1.0})
    w.close()
    assert any("offline-run" in d for d in os.listdir(tmp_path / "wb" / "wandb"))


def test_an_event_file_with_a_bad_crc_is_refused(tmp_path):
    w = track.TensorBoardWriter(str(tmp_path))
    w.log(3, {"a": 1.0})
    w.close()
    data = bytearray(open(w.path, "rb").read())
    data[-6] ^= 0xFF
    open(w.path, "wb").write(bytes(data))
    with pytest.raises(ValueError, match="CRC does not match"):
        track.read_events(w.path)
