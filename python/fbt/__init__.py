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

import os

from ._fbt import *  # noqa: F401,F403
__version__: str = getattr(_fbt, "__version__")  # set by the extension (module.cpp); a str the stubs do not list

__all__ = [n for n in dir(_fbt) if not n.startswith("_")]

from . import data  # noqa: E402  fbt.data: the trainer's batches and schedule (python/fbt/data.py)


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


__all__ += ["check_fuser", "blas_threads"]

_train = _fbt.train


def blas_threads(n=1):
    """A context in which numpy's BLAS (OpenBLAS, MKL, ...) uses at most n threads (threadpoolctl; a no-op without it).

    fbt.train runs inside one: fbt's own threads (``threads=``) are the run's, and a BLAS pool that spins after each of
    a callback's or a Python fuser's numpy calls would take their cores (docs/python.md, "Threads")."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency of the package
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=n, user_api="blas")


def train(config=None, callback=None, on_eval=None, verbose=True, track=None, track_dir=None, blas_threads_limit=1, **fields):  # type: ignore[no-redef]  # noqa: F811
    """train(config=None, callback=None, on_eval=None, verbose=True, track=None, track_dir=None, blas_threads_limit=1, **fields)

    fbt._fbt.train (the command's trainer: every keyword is a flag of `fbt train`; see its docstring) with, when
    ``track`` is "tensorboard" or "wandb", every train.jsonl and eval.jsonl line also logged to that tracker as the run
    goes (fbt.track: ``train/loss/pass_k``, ``train/tok_s``, ``eval/val_loss/pass_k``, ...), into ``track_dir``
    (default OUT_DIR/tensorboard or OUT_DIR/wandb). numpy's BLAS is limited to ``blas_threads_limit`` threads while the
    run trains (None: as it is), so that it does not take the cores of fbt's own threads. Returns a TrainResult.
    """
    if blas_threads_limit is not None:
        with blas_threads(blas_threads_limit):
            return train(config, callback, on_eval, verbose, track, track_dir, None, **fields)
    if track is None:
        return _train(config=config, callback=callback, on_eval=on_eval, verbose=verbose, **fields)
    from . import track as tracking

    out_dir = fields.get("out_dir") or (config.get("out_dir") if isinstance(config, dict) else None)
    if not out_dir and fields.get("resume"):
        out_dir = os.path.dirname(os.path.normpath(os.fspath(fields["resume"])))
    out_dir = os.fspath(out_dir or "runs/default")
    tracker = tracking.Tracker(tracking.make_writer(track, track_dir or os.path.join(out_dir, track), name=os.path.basename(os.path.abspath(out_dir))))

    def on_step(step, report):
        tracker.train(report.record)
        return callback(step, report) if callback is not None else None

    def on_evaluation(step, record):
        tracker.eval(record)
        if on_eval is not None:
            on_eval(step, record)

    try:
        return _train(config=config, callback=on_step, on_eval=on_evaluation, verbose=verbose, **fields)
    finally:
        tracker.close()
