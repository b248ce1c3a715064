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


def check_fuser(cls, hidden_size=8, rows=5, options=None, seed=0, eps=1e-6, tol=1e-6):
    """Checks a fuser written in Python (for fbt.register_fuser) against central differences, in float64.

    With random parameters (away from their init), states s, embeddings e and an upstream gradient g (rows x
    hidden_size), the gradients that ``backward`` returns for s, e and every parameter are compared with the central
    differences (step ``eps``) of L = sum(forward(params, s, e)[0] * g). The class must accept float64 arrays (numpy
    code usually does). Returns {name: normwise relative error} ("s", "e" and each parameter); raises ValueError
    naming the worst one when it exceeds ``tol``.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    opts = dict(getattr(cls, "options", {}) or {})
    opts.update(options or {})
    f = cls(hidden_size, opts)
    params = {n: rng.normal(0.0, 0.5, size=tuple(spec[0])) for n, spec in f.parameters().items()}
    s = rng.normal(size=(rows, hidden_size))
    e = rng.normal(size=(rows, hidden_size))
    g = rng.normal(size=(rows, hidden_size))

    def loss():
        u, _ = f.forward(params, s, e)
        return float(np.sum(np.asarray(u, dtype=np.float64) * g))

    u, ctx = f.forward(params, s, e)
    if np.shape(u) != (rows, hidden_size):
        raise ValueError("check_fuser: forward returned u of shape %s, expected %s" % (np.shape(u), (rows, hidden_size)))
    ds, de, dparams = f.backward(params, ctx, s, e, g)
    dparams = dparams or {}

    def numeric(x):
        d = np.zeros_like(x)
        it = np.nditer(x, flags=["multi_index"])
        for _ in it:
            i = it.multi_index
            keep = x[i]
            x[i] = keep + eps
            hi = loss()
            x[i] = keep - eps
            lo = loss()
            x[i] = keep
            d[i] = (hi - lo) / (2 * eps)
        return d

    def rel(a, n):
        a = np.zeros_like(n) if a is None else np.asarray(a, dtype=np.float64).reshape(n.shape)
        return float(np.linalg.norm(a - n) / max(np.linalg.norm(n), 1e-12)) if np.linalg.norm(n) > 0 else float(np.linalg.norm(a))

    errors = {"s": rel(ds, numeric(s)), "e": rel(de, numeric(e))}
    for n in params:
        errors[n] = rel(dparams.get(n), numeric(params[n]))
    worst = max(errors, key=errors.get)
    if errors[worst] > tol:
        raise ValueError("check_fuser: %s's backward disagrees with central differences on %s: normwise relative error %.3g > %g (all: %s)"
                         % (getattr(cls, "name", cls.__name__), worst, errors[worst], tol, ", ".join("%s %.2g" % kv for kv in errors.items())))
    return errors


__all__ += ["check_fuser"]
