"""fbt.data: the trainer's data and schedule from Python, without training (train/run_plan.hpp).

The same fields fbt.train takes (a config dict or JSON file, then keywords: preset, data, seq_len, batch_size,
grad_accum, steps, seed, the schedule and LR fields, ...) describe the same run, so

    for b in fbt.data.batches(data="task:addition", steps=100, batch_size=8, seq_len=128):
        b["tokens"]      # (grad_accum, B, T) int32: the micro-batches of step b["step"]
        b["targets"]     # (grad_accum, B, T) int32, -1 where no loss is taken (SFT prompts, padding)
        b["doc_starts"]  # (grad_accum, B, T) uint8: 1 where a document starts
        b["K"], b["lambda"], b["prefix"]           # the pass plan: passes, fed-back weight, (K, B) plain prefixes
        b["lr"], b["matrix_lr"], b["z_loss"]       # the rates of the step

are the batches and the plan `fbt.train(data="task:addition", steps=100, ...)` trains on, step by step (a task, a text
file, a token file (.bin / .npy) or SFT prompt/response lines (.jsonl)); plan() is the same without the tokens (the
schedule alone, fast), eval_windows() the validation windows the run's evaluation reads, and task_examples() the
problems `fbt eval` scores. A distributed run splits each batch's rows over its ranks; these are the whole batches.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Optional

from ._fbt import RunPlan, task_examples  # noqa: F401

__all__ = ["RunPlan", "batches", "plan", "eval_windows", "task_examples"]


def batches(config: Any = None, limit: Optional[int] = None, **fields: Any) -> Iterator[Dict[str, Any]]:
    """Each step's micro-batches and plan (see the module's doc), for the run's steps (the field `steps`) or the first
    `limit` of them."""
    p = RunPlan(config, **fields)
    n = p.steps if limit is None else min(int(limit), p.steps)
    for _ in range(n):
        yield p.next(True)


def plan(config: Any = None, limit: Optional[int] = None, **fields: Any) -> Iterator[Dict[str, Any]]:
    """Each step's pass plan and rates (step, K, lambda, prefix, lr, matrix_lr, z_loss), without copying the batches;
    the run's steps or the first `limit`."""
    p = RunPlan(config, **fields)
    n = p.steps if limit is None else min(int(limit), p.steps)
    for _ in range(n):
        yield p.next(False)


def eval_windows(config: Any = None, n: Optional[int] = None, **fields: Any) -> Iterator[Dict[str, Any]]:
    """The run's validation windows (tokens, targets, doc_starts, each (seq_len,)), the first n or all of them."""
    p = RunPlan(config, **fields)
    total = p.num_eval_windows if n is None else min(int(n), p.num_eval_windows)
    for i in range(total):
        yield p.eval_window(i)
