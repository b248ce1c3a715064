"""fbt.train, its callback and Ctrl-C, fbt.evaluate and fbt.probe against the `fbt` command (docs/python.md)."""
import json
import os
import signal
import subprocess
import threading

import pytest

import fbt
from conftest import cli_path

# a tiny run: 20 steps of 4 x 32 tokens of task:running_sum, feedback from step 5 on (K = 2 or 3)
TINY = dict(data="task:running_sum", steps=20, batch_size=4, seq_len=32, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, intermediate_size=64, max_position_embeddings=64,
            feedback_start=0.25, warmup_steps=4, eval_every=10, eval_windows=2, seq_eval_windows=1,
            monitor_passes=3, progress=False)


def fbt_command():
    """The `fbt` command of this build (FBT_CLI), or skip: the comparisons need it."""
    path = cli_path()
    if path is None:
        pytest.skip("the fbt command is not built (target fbt_cli; FBT_CLI names it): no bit-for-bit comparison")
    return path


def flags(d):
    out = []
    for k, v in d.items():
        out += [f"--{k}", ("true" if v else "false") if isinstance(v, bool) else str(v)]
    return out


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_train_equals_the_command_step_for_step(tmp_path):
    cli = fbt_command()
    subprocess.run([cli, "train", *flags(TINY), "--out_dir", str(tmp_path / "cli")], check=True, capture_output=True)
    seen = []
    r = fbt.train(**TINY, out_dir=str(tmp_path / "py"), verbose=False, callback=lambda step, rep: seen.append((step, list(rep.loss))))
    assert r.step == r.steps == 20 and not r.stopped
    cli_log = read_jsonl(tmp_path / "cli" / "train.jsonl")
    py_log = read_jsonl(tmp_path / "py" / "train.jsonl")
    assert [j["loss"] for j in py_log] == [j["loss"] for j in cli_log], "the same losses, bit for bit"
    assert [s for s, _ in seen] == list(range(20))
    assert [l for _, l in seen] == [j["loss"] for j in cli_log], "the callback gets each step's losses"
    assert r.loss == cli_log[-1]["loss"]
    assert any(j["K"] > 1 for j in cli_log), "the run must reach the fed-back passes"
    assert read_jsonl(tmp_path / "py" / "eval.jsonl") == read_jsonl(tmp_path / "cli" / "eval.jsonl"), "the evaluations too"
    a = (tmp_path / "cli" / "checkpoint" / "model.safetensors").read_bytes()
    b = (tmp_path / "py" / "checkpoint" / "model.safetensors").read_bytes()
    assert a == b, "the same weights, bit for bit"


def test_callback_false_stops_with_a_checkpoint_and_resume_continues(tmp_path):
    straight = fbt.train(**TINY, out_dir=str(tmp_path / "a"), verbose=False)
    r = fbt.train(**TINY, out_dir=str(tmp_path / "b"), verbose=False, callback=lambda step, rep: step < 6)
    assert r.stopped and r.step == 7, "False after step 6 (0-based): 7 steps taken"
    assert len(read_jsonl(tmp_path / "b" / "train.jsonl")) == 7
    rest = fbt.train(resume=r.checkpoint, verbose=False)
    assert rest.step == 20 and not rest.stopped
    losses = lambda d: [j["loss"] for j in read_jsonl(tmp_path / d / "train.jsonl")]
    assert losses("b") == losses("a"), "the stopped run's log, continued, is the straight run's"
    assert rest.loss == straight.loss
    a = (tmp_path / "a" / "checkpoint" / "model.safetensors").read_bytes()
    b = (tmp_path / "b" / "checkpoint" / "model.safetensors").read_bytes()
    assert a == b, "stopped + resumed = one run"


def test_an_exception_in_the_callback_stops_the_run_and_is_raised(tmp_path):
    def boom(step, rep):
        if step == 3:
            raise RuntimeError("from the callback")
    with pytest.raises(RuntimeError, match="from the callback"):
        fbt.train(**TINY, out_dir=str(tmp_path / "x"), verbose=False, callback=boom)
    st = fbt.evaluate(str(tmp_path / "x" / "checkpoint"), seq_eval_windows=0, monitor_passes=0)
    assert st["step"] == 4, "the checkpoint is the step the callback stopped"


def test_ctrl_c_stops_with_keyboard_interrupt_and_a_checkpoint(tmp_path):
    long_run = {**TINY, "steps": 100000, "eval_every": 0}
    started = threading.Event()

    def interrupt():
        started.wait(30)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        fbt.train(**long_run, out_dir=str(tmp_path / "c"), verbose=False,
                  callback=lambda step, rep: started.set() if step == 2 else None)
    t.join()
    n = len(read_jsonl(tmp_path / "c" / "train.jsonl"))
    assert 3 <= n < 100000
    assert (tmp_path / "c" / "checkpoint" / "model.safetensors").exists()


def test_ctrl_c_stops_a_run_without_a_callback(tmp_path):
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fbt.train(**{**TINY, "steps": 100000, "eval_every": 0}, out_dir=str(tmp_path / "n"), verbose=False)
    finally:
        timer.cancel()
    assert 1 <= len(read_jsonl(tmp_path / "n" / "train.jsonl")) < 100000
    assert (tmp_path / "n" / "checkpoint" / "model.safetensors").exists()


def test_bad_fields_are_refused_naming_them(tmp_path):
    with pytest.raises(ValueError, match="steps"):
        fbt.train(**{**TINY, "steps": -1}, out_dir=str(tmp_path / "n"), verbose=False)
    with pytest.raises(ValueError, match="no_such_field"):
        fbt.train(**TINY, no_such_field=1, out_dir=str(tmp_path / "u"), verbose=False)
    with pytest.raises(TypeError, match="steps"):
        fbt.train(**{**TINY, "steps": object()}, out_dir=str(tmp_path / "t"), verbose=False)
    with pytest.raises(TypeError, match="callback"):
        fbt.train(**TINY, callback=5, out_dir=str(tmp_path / "c"), verbose=False)
    with pytest.raises(TypeError, match="config"):
        fbt.train(config=3, out_dir=str(tmp_path / "k"), verbose=False)


def test_a_string_where_a_number_belongs_is_refused(tmp_path):
    # issue 47: {"steps": "3"} in a config dict was read as 3 (a config file refuses it)
    with pytest.raises(TypeError, match="steps must be a number, got the string \"3\""):
        fbt.train(config={**TINY, "steps": "3"}, out_dir=str(tmp_path / "s"), verbose=False)
    with pytest.raises(TypeError, match="progress must be a bool"):
        fbt.train(**{**TINY, "progress": "false"}, out_dir=str(tmp_path / "p"), verbose=False)


def test_a_second_run_on_the_same_out_dir_in_this_process_is_refused(tmp_path):
    # issue 47: the lock is the process's, so two fbt.train calls on one out_dir both ran (train.jsonl got both
    # runs' lines, one died on a shared temporary directory). The second is refused while the first runs.
    out = str(tmp_path / "shared")
    seen = []

    def second(step, report):
        if step == 0:
            with pytest.raises(ValueError, match="in use by another run in this process"):
                fbt.train(**TINY, out_dir=out, verbose=False)
            seen.append(step)
        return True

    r = fbt.train(**TINY, out_dir=out, callback=second, verbose=False)
    assert seen == [0] and r.step == TINY["steps"]
    assert len(read_jsonl(tmp_path / "shared" / "train.jsonl")) == TINY["steps"]
    assert not (tmp_path / "shared" / "run.lock").exists()  # removed by its holder
    assert fbt.train(resume=r.checkpoint, steps=TINY["steps"] + 2, verbose=False).step == TINY["steps"] + 2


def test_config_dict_and_file_are_the_commands_config(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({k: v for k, v in TINY.items()}))
    a = fbt.train(config=str(cfg), steps=6, out_dir=str(tmp_path / "f"), verbose=False)
    b = fbt.train(config=dict(TINY), steps=6, out_dir=str(tmp_path / "d"), verbose=False)
    assert a.loss == b.loss and a.step == 6


def test_evaluate_equals_the_runs_last_evaluation(tmp_path):
    r = fbt.train(**TINY, out_dir=str(tmp_path / "e"), verbose=False)
    last = read_jsonl(tmp_path / "e" / "eval.jsonl")[-1]
    got = fbt.evaluate(r.checkpoint)
    assert got == last, "number for number"


def test_probe_equals_the_commands_json(tmp_path, capfd):
    cli = fbt_command()
    r = fbt.train(**{**TINY, "max_position_embeddings": 256}, out_dir=str(tmp_path / "p"), verbose=False)
    opts = dict(task="delayed_memory", prefill="standard,fused(1)", null_lines="0,8", groups=6, folds=2)
    printed = subprocess.run([cli, "probe", "--checkpoint", r.checkpoint, *flags(opts), "--out", str(tmp_path / "cli.json")],
                             check=True, capture_output=True, text=True).stdout
    want = json.loads((tmp_path / "cli.json").read_text())
    capfd.readouterr()
    got = fbt.probe(checkpoint=r.checkpoint, **{**opts, "prefill": ["standard", "fused(1)"], "null_lines": [0, 8]})
    quiet = capfd.readouterr()
    assert quiet.out == "" and quiet.err == "", "fbt.probe prints nothing (not even at the C level)"
    table, notes = got.pop("table"), got.pop("notes")
    assert got == want
    assert table == printed.split("wrote ")[0], "the table the command prints"
    assert notes == []
    got2 = fbt.probe(checkpoint=r.checkpoint, out=str(tmp_path / "py.json"), **{**opts, "prefill": ["standard", "fused(1)"], "null_lines": [0, 8]})
    assert json.loads((tmp_path / "py.json").read_text()) == want and got2["table"] == table
    with pytest.raises(ValueError, match="folds"):
        fbt.probe(checkpoint=r.checkpoint, task="delayed_memory", folds=1)


def test_numpy_numbers_are_numbers(tmp_path):
    """A sweep built with numpy: np.float64 / np.int64 / np.bool_ values and a 1-d array pass as the numbers they hold."""
    import numpy as np

    plain = fbt.train(**{**TINY, "steps": 6, "lr": 3e-3}, out_dir=str(tmp_path / "plain"), verbose=False)
    given = {**TINY, "steps": np.int64(6), "lr": np.float64(3e-3), "warmup_steps": np.int32(4), "progress": np.bool_(False),
             "feedback_start": np.float32(0.25)}
    r = fbt.train(**given, out_dir=str(tmp_path / "numpy"), verbose=False)
    assert r.loss == plain.loss and r.step == 6, "the same run, step for step"
    per_layer = fbt.train(**{**TINY, "steps": 2, "layer_intermediate_size": np.array([64, 32])}, out_dir=str(tmp_path / "layers"),
                          verbose=False)
    assert per_layer.step == 2
    c = fbt.ModelConfig.from_dict({"hidden_size": np.int64(64), "num_attention_heads": np.int64(4), "rms_norm_eps": np.float64(1e-5)})
    assert c.hidden_size == 64 and c.num_attention_heads == 4
    with pytest.raises(ValueError, match="rms_norm_eps"):
        fbt.ModelConfig.from_dict({"rms_norm_eps": np.float64("nan")})
    with pytest.raises(TypeError, match="lr"):
        fbt.train(**{**TINY, "lr": object()}, out_dir=str(tmp_path / "bad"), verbose=False)


def test_the_command_from_the_package(tmp_path):
    """`python -m fbt` (and the console script pip installs, fbt.__main__:main) is the `fbt` command."""
    import sys

    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(fbt.__file__)) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "fbt", "--help"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "usage: fbt <command>" in r.stdout
    r = subprocess.run([sys.executable, "-m", "fbt", "sample", "--checkpoint", str(tmp_path / "none")], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and r.stderr.startswith("fbt sample: error:") and r.stderr.count("\n") == 1
    out = str(tmp_path / "run")
    r = subprocess.run([sys.executable, "-m", "fbt", "train", *flags({**TINY, "steps": 3}), "--out_dir", out], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert fbt.evaluate(out + "/checkpoint")["step"] == 3


def test_the_callback_sees_every_train_jsonl_field_and_each_evaluation(tmp_path):
    reports, evals = [], []
    fbt.train(**TINY, out_dir=str(tmp_path / "c"), verbose=False, callback=lambda s, rep: reports.append(rep),
              on_eval=lambda s, rec: evals.append((s, rec)))
    assert [rep.record for rep in reports] == read_jsonl(tmp_path / "c" / "train.jsonl"), "the whole line, every step"
    assert [rec for _, rec in evals] == read_jsonl(tmp_path / "c" / "eval.jsonl"), "the whole line, every evaluation"
    assert [s for s, _ in evals] == [10, 20]
    fed = [rep for rep in reports if rep.K > 1]
    assert fed and all(k in fed[-1].record for k in ("tok_s", "tokens", "state_rms", "gate_mean", "gate_std", "feedback_ratio"))
    for k, v in fed[-1].record.items():
        assert getattr(fed[-1], k) == v, k
    with pytest.raises(AttributeError, match="no field 'nope'"):
        fed[-1].nope
    with pytest.raises(ZeroDivisionError):  # an exception in on_eval stops the run (with a checkpoint) and is raised
        fbt.train(**TINY, out_dir=str(tmp_path / "d"), verbose=False, on_eval=lambda s, rec: 1 / 0)
    assert os.path.exists(tmp_path / "d" / "checkpoint" / "model.safetensors")
