"""A user's own extension module over fbt/python.hpp (tests/python/own_module/my_fbt.cpp): the same API with the
user's fuser (LowRankFuser, examples/own_project), one ModelConfig class shared with fbt, a Model class of its own."""
import os
import sys

import numpy as np
import pytest

import fbt
from conftest import TINY

OWN = os.environ.get("FBT_OWN_MODULE_DIR", "")
if not OWN or not any(f.startswith("my_fbt.") for f in (os.listdir(OWN) if os.path.isdir(OWN) else [])):
    pytest.skip("the own-module test extension (target fbt_python_own_module) is not built", allow_module_level=True)
sys.path.insert(0, OWN)
import my_fbt  # noqa: E402


def test_the_config_class_is_shared_and_the_model_class_is_not():
    assert my_fbt.ModelConfig is fbt.ModelConfig
    assert my_fbt.Model is not fbt.Model and my_fbt.Decoder is not fbt.Decoder


def test_the_users_fuser_builds_saves_loads_and_decodes(tmp_path):
    cfg = fbt.ModelConfig(**dict(TINY, fuser="lowrank", fuser_options={"rank": 4}))
    m = my_fbt.Model(cfg, seed=2)
    assert m.config.fuser == "lowrank" and m.config.fuser_options == {"rank": 4}
    assert "model.feedback.fuser.w_a.weight" in m.named_parameters() or any("w_a" in k for k in m.named_parameters())
    lg = m.logits("hello", passes=3)
    assert lg.shape == (3, 1, 6, 257)
    m.save(str(tmp_path / "ck"))
    m2 = my_fbt.Model.load(str(tmp_path / "ck"))
    assert np.array_equal(m2.logits("hello", passes=3), lg)
    out = my_fbt.Decoder(m2).generate("hi", mode="fused(1)", greedy=True, max_new_tokens=6)
    assert out.shape == (6,)
    # the built-in module does not know the fuser, and says so
    with pytest.raises(ValueError, match="lowrank"):
        fbt.Model.load(str(tmp_path / "ck"))


def test_the_modules_lists_decide_what_it_loads(tmp_path):
    fbt.Model(dict(TINY, fuser="glu"), seed=1).save(str(tmp_path / "glu"))
    with pytest.raises(ValueError, match="glu"):
        my_fbt.Model.load(str(tmp_path / "glu"))
