"""fbt: full-bandwidth transformers (arXiv:2608.08888) from Python.

The classes and functions are the C++ library's, bound with nanobind (the extension fbt._fbt); docs/python.md
is the guide. Quick start::

    import fbt
    model = fbt.Model(fbt.ModelConfig(num_hidden_layers=2, hidden_size=64), seed=1)
    logits = model.logits("hello", passes=3)          # numpy (K, B, T, V), the library's buffer
"""
try:
    from . import _fbt
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "fbt: the compiled extension fbt._fbt could not be imported (%s). Build it with `pip install .` from the "
        "repository root (after scripts/setup.sh), or build the CMake target fbt_python and put <build>/python on "
        "PYTHONPATH (docs/python.md)." % (e,)
    ) from e

from ._fbt import *  # noqa: F401,F403
from ._fbt import __version__  # noqa: F401

__all__ = [n for n in dir(_fbt) if not n.startswith("_")]
