"""fbt.build_info() and fbt.model_types(): the build's optional parts say what to install, and visit_model reaches
the C++ model type a Model's config names (a part of the extension in its own file, python/src/info.cpp)."""
import fbt
from conftest import TINY


def test_build_info_names_every_part():
    info = fbt.build_info()
    assert info["version"] == fbt.__version__
    assert info["fusers"] == ["none", "glu", "gated_add", "concat"] and info["blocks"] == ["decoder"]
    for part in ("bf16", "mpi", "cuda"):
        assert info[part] in ("oneDNN", "yes") or "install" in info[part] or "CPU" in info[part], (part, info[part])


def test_model_types_follow_the_config():
    for fuser in ("none", "glu", "gated_add", "concat"):
        assert fbt.model_types(fbt.Model(dict(TINY, fuser=fuser))) == (fuser, "decoder")
