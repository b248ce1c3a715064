"""A plugin from Python (fbt.load_plugin, fbt/plugins.hpp): examples/own_project's pieces in liblowrank.so (fuser
lowrank, block gated_attn, policy soft_first, optimizer sgdm), built by the tests (FBT_PLUGIN), joined to the
stock extension without building anything of fbt: Model, train, Decoder and checkpoints know them by name."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fbt
from conftest import TINY

PLUGIN = os.environ.get("FBT_PLUGIN", "")
if not PLUGIN or not os.path.isfile(PLUGIN):
    pytest.skip("the test plugin liblowrank.so (tests/CMakeLists.txt, target lowrank) is not built", allow_module_level=True)


def fresh_python(code):
    """Runs `code` in a new interpreter (no plugin loaded yet); returns its output."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=120)
    return r.returncode, r.stdout + r.stderr


def test_without_the_plugin_its_fuser_is_unknown_and_the_error_says_how_to_add_one(tmp_path):
    code = ("import fbt\ntry:\n    fbt.Model(dict(%r, fuser='lowrank'))\nexcept ValueError as e:\n    print('ValueError:', e)\n" % TINY)
    rc, out = fresh_python(code)
    assert rc == 0, out
    assert 'unknown fuser "lowrank"' in out and "fbt.load_plugin" in out, out


def test_load_plugin_registers_its_pieces_once():
    info = fbt.load_plugin(PLUGIN)
    assert info["file"] == os.path.basename(PLUGIN)
    assert set(info["pieces"]) == {"fuser lowrank", "block gated_attn", "policy soft_first", "optimizer sgdm"}, info
    again = fbt.load_plugin(PLUGIN)
    assert again == info, "loading the same file again is a no-op"
    assert "lowrank" in fbt.build_info()["fusers"] and "gated_attn" in fbt.build_info()["blocks"]


def test_the_plugins_pieces_build_save_load_and_decode(tmp_path):
    fbt.load_plugin(PLUGIN)
    cfg = fbt.ModelConfig(**dict(TINY, fuser="lowrank", fuser_options={"rank": 4}, block="gated_attn"))
    m = fbt.Model(cfg, seed=2)
    assert fbt.model_types(m) == ("lowrank", "gated_attn")
    assert any("w_a" in k for k in m.named_parameters()) and any("gate.weight" in k for k in m.named_parameters())
    lg = m.logits("hello", passes=3)
    assert lg.shape == (3, 1, 6, 257) and np.isfinite(lg).all()
    m.save(str(tmp_path / "ck"))
    back = fbt.Model.load(str(tmp_path / "ck"))
    assert np.array_equal(back.logits("hello", passes=3), lg)
    for mode in ("standard", "soft", "fused(2)", "soft_first(2)"):
        out = fbt.Decoder(back).generate("hi", mode=mode, greedy=True, max_new_tokens=6)
        assert out.shape == (6,), mode


def test_train_with_the_plugins_fuser_and_optimizer(tmp_path):
    fbt.load_plugin(PLUGIN)
    r = fbt.train(**TINY, fuser="lowrank", optimizer="sgdm", lr=0.01, steps=4, feedback_start=0.0, batch_size=2, seq_len=16,
                  eval_every=0, eval_windows=1, seq_eval_windows=0, monitor_passes=0, out_dir=str(tmp_path / "run"), verbose=False)
    assert r.step == 4 and all(np.isfinite(r.loss))
    m = fbt.Model.load(r.checkpoint)
    assert m.config.fuser == "lowrank"


def test_a_plugin_for_another_interface_is_refused(tmp_path):
    bad = os.path.join(os.path.dirname(PLUGIN), "libbad_abi_plugin.so")
    if not os.path.isfile(bad):
        pytest.skip("libbad_abi_plugin.so is not built beside the plugin")
    with pytest.raises(ValueError, match="built for another fbt"):
        fbt.load_plugin(bad)
    with pytest.raises(ValueError, match="no such file"):
        fbt.load_plugin(str(tmp_path / "nothing.so"))
