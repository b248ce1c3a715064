"""A fuser written in Python (fbt.register_fuser, fbt/python/py_fuser.hpp) and its central-difference check
(fbt.check_fuser): the check passes on a right backward and fails on a wrong one; the Python fuser computes what
the same fuser in C++ computes (the plugin's lowrank, u = e + (s A^T) B^T, same weights: logits within float
rounding); it trains, decodes in every mode and checkpoints through the model's fuser slot; bad classes and bad
results are refused naming the fuser, the method and what was expected."""
import os

import numpy as np
import pytest

import fbt
from conftest import TINY


class PyLowRank:
    """u = e + (s A^T) B^T: A (r, D) ~ N(0, 1/D), B (D, r) = 0 (the model starts as the plain one)."""
    name = "pylowrank"
    options = {"rank": 4}

    def __init__(self, hidden_size, options):
        self.D, self.r = hidden_size, int(options["rank"])

    def parameters(self):
        return {"w_a.weight": ((self.r, self.D), ("normal", 1.0 / np.sqrt(self.D))), "w_b.weight": ((self.D, self.r), "zeros")}

    def forward(self, p, s, e):
        z = s @ p["w_a.weight"].T
        return e + z @ p["w_b.weight"].T, z

    def backward(self, p, z, s, e, du):
        dz = du @ p["w_b.weight"]
        return dz @ p["w_a.weight"], du, {"w_b.weight": du.T @ z, "w_a.weight": dz.T @ s}


class WrongBackward(PyLowRank):
    name = "pywrong"

    def backward(self, p, z, s, e, du):
        ds, de, dp = super().backward(p, z, s, e, du)
        dp["w_a.weight"] = dp["w_a.weight"] * 1.01  # off by 1%
        return ds, de, dp


def test_check_fuser_passes_a_right_backward_and_fails_a_wrong_one():
    errors = fbt.check_fuser(PyLowRank, hidden_size=6, rows=4)
    assert set(errors) == {"s", "e", "w_a.weight", "w_b.weight"} and max(errors.values()) < 1e-8, errors
    with pytest.raises(ValueError, match="w_a.weight"):
        fbt.check_fuser(WrongBackward, hidden_size=6, rows=4)


def test_the_python_fuser_trains_decodes_and_checkpoints(tmp_path):
    fbt.register_fuser(PyLowRank)
    assert "pylowrank" in fbt.build_info()["fusers"]
    m = fbt.Model(dict(TINY, fuser="pylowrank", fuser_options={"rank": 3}), seed=3)
    assert m.config.fuser_options == {"rank": 3}
    assert m.named_parameters()["model.feedback.w_a.weight"].shape == (3, TINY["hidden_size"])
    lg = m.logits("hello there", passes=3)
    assert lg.shape == (3, 1, 12, 257) and np.isfinite(lg).all()
    for mode in ("standard", "soft", "fused(1)", "fused(2)"):
        assert fbt.Decoder(m).generate("hi", mode=mode, greedy=True, max_new_tokens=5).shape == (5,), mode
    m.save(str(tmp_path / "ck"))
    assert np.array_equal(fbt.Model.load(str(tmp_path / "ck")).logits("hello there", passes=3), lg)
    losses = []
    r = fbt.train(**TINY, fuser="pylowrank", steps=12, feedback_start=0.0, lr=0.01, batch_size=4, seq_len=32, eval_every=0,
                  eval_windows=1, seq_eval_windows=0, monitor_passes=0, out_dir=str(tmp_path / "run"), verbose=False,
                  callback=lambda step, rep: losses.append(rep.loss[0]))
    assert r.step == 12 and all(np.isfinite(losses)) and losses[-1] < losses[0], losses
    trained = fbt.Model.load(r.checkpoint).named_parameters()
    assert np.abs(trained["model.feedback.w_b.weight"]).max() > 0, "B got gradient through the Python backward"



def test_the_python_fuser_computes_what_the_cpp_one_does():
    plugin = os.environ.get("FBT_PLUGIN", "")
    if not plugin or not os.path.isfile(plugin):
        pytest.skip("the plugin with the C++ lowrank fuser (liblowrank.so) is not built")
    fbt.load_plugin(plugin)
    fbt.register_fuser(PyLowRank)
    cpp = fbt.Model(dict(TINY, fuser="lowrank", fuser_options={"rank": 4}), seed=5)
    py = fbt.Model(dict(TINY, fuser="pylowrank", fuser_options={"rank": 4}), seed=5)
    rng = np.random.default_rng(1)
    pc, pp = cpp.named_parameters(), py.named_parameters()
    assert set(pc) == set(pp), "the same tensors under the same names"
    for n in pc:
        pc[n][...] = pc[n] + rng.normal(0, 0.05, size=pc[n].shape).astype(np.float32)  # B away from 0
        pp[n][...] = pc[n]
    a, b = cpp.logits("12+34=46 and more", passes=3), py.logits("12+34=46 and more", passes=3)
    assert np.max(np.abs(a - b)) <= 1e-4 * np.max(np.abs(a)), np.max(np.abs(a - b))


class NoForward:
    name = "pynoforward"

    def parameters(self):
        return {}

    def backward(self, *a):
        return None, None, None


class BadShape(PyLowRank):
    name = "pybadshape"

    def forward(self, p, s, e):
        return e[:, :-1], None


def test_bad_classes_and_results_are_refused_by_name():
    with pytest.raises(ValueError, match="forward"):
        fbt.register_fuser(NoForward)
    with pytest.raises(ValueError, match="fuser of this program"):
        fbt.register_fuser(type("Glu", (PyLowRank,), {"name": "glu"}))
    fbt.register_fuser(BadShape)
    m = fbt.Model(dict(TINY, fuser="pybadshape"), seed=1)
    with pytest.raises(ValueError, match='Python fuser "pybadshape", forward: u: expected shape'):
        m.logits("hello", passes=2)
    with pytest.raises(ValueError, match="fuser_options.rank"):
        fbt.Model(dict(TINY, fuser="pylowrank", fuser_options={"rank": "x"}))


def test_a_checkpoint_of_a_python_fuser_names_the_class_to_register(tmp_path):
    import subprocess
    import sys
    fbt.register_fuser(PyLowRank)
    fbt.Model(dict(TINY, fuser="pylowrank"), seed=1).save(str(tmp_path / "ck"))
    code = "import fbt\ntry:\n    fbt.Model.load(%r)\nexcept ValueError as e:\n    print(e)\n" % str(tmp_path / "ck")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=120).stdout
    assert 'unknown fuser "pylowrank"' in out and "fbt.register_fuser(PyLowRank)" in out, out
