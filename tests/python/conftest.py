"""Shared fixtures of the Python tests (run by ctest through run_pytest.py, or by hand:
PYTHONPATH=build/python FBT_CLI=build/tools/fbt python3 -m pytest tests/python)."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import fbt

# A model small enough that every test runs in milliseconds: byte vocabulary, 2 layers of width 32.
TINY = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64,
            max_position_embeddings=128)


@pytest.fixture(scope="session")
def tiny_config():
    return fbt.ModelConfig(**TINY)


@pytest.fixture(scope="session")
def tiny_model(tiny_config):
    return fbt.Model(tiny_config, seed=7)


@pytest.fixture
def work_dir(tmp_path):
    return tmp_path


def cli_path():
    """The `fbt` command of this build (FBT_CLI), or None: the comparisons with it are skipped without it."""
    p = os.environ.get("FBT_CLI", "")
    if p and os.path.exists(p):
        return p
    return shutil.which("fbt") if not p else None


def run_cli(*args):
    exe = cli_path()
    if exe is None:
        pytest.skip("the fbt command is not built (target fbt; FBT_CLI names it): no bit-for-bit comparison")
    r = subprocess.run([exe] + [str(a) for a in args], capture_output=True, text=True)
    assert r.returncode == 0, "fbt %s failed: %s" % (" ".join(map(str, args)), r.stderr)
    return r.stdout


def ids(*xs):
    return np.array(xs, dtype=np.int32)
