#!/usr/bin/env python3
"""lm_eval_routes.py: the two lm-evaluation-harness routes on one model, timed side by side (docs/interop.md).

A full-bandwidth model (paper preset, D 128, 4 layers, random weights perturbed so that feedback matters) answers
fbt's addition task (100 problems, generate_until: about 70 greedy tokens each) in soft mode through
  fbt   python -m fbt.lm_eval --model fbt (fbt's C++ decoder, fbt.Decoder.generate)
  hf    lm_eval --model hf on its export (the remote-code FbtForCausalLM, python/fbt/hf: PyTorch)
and the loglikelihood variant (fbt_addition_ll, 100 requests) in standard mode. Prints each route's wall time
(median of --repeats runs), the ratio, and whether the responses are equal.

    PYTHONPATH=build/python python3 benchmarks/lm_eval_routes.py [--repeats 3] [--n 100] [--threads 1]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1, help="torch's threads (fbt's decoder uses one per sequence batch)")
    a = ap.parse_args()
    try:
        import torch
        import lm_eval  # noqa: F401
        from lm_eval import simple_evaluate
        from lm_eval.tasks import TaskManager
    except ImportError as e:
        print(f"lm_eval_routes: SKIP: {e}")
        return 0
    import fbt
    import fbt.lm_eval as fle
    torch.set_num_threads(a.threads)
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    fle.make_lm_class()
    wd = tempfile.mkdtemp(prefix="fbt_lm_eval_routes_")
    m = fbt.Model(dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, intermediate_size=384,
                       max_position_embeddings=512, input_norm="feedback_passes", gate_norm="shared", block_norm="sandwich"), seed=1)
    rng = np.random.default_rng(0)
    for name, w in m.named_parameters().items():
        w += rng.normal(0.0, 0.3 if name.startswith("model.feedback.") and w.ndim == 2 else 0.02, w.shape).astype(np.float32)
    ck, hf = os.path.join(wd, "ck"), os.path.join(wd, "hf")
    m.save(ck)
    fbt.export_hf(m, hf)
    tdir = os.path.join(wd, "tasks")
    fle.write_tasks(tdir, tasks=("addition",), n=a.n)
    tm = TaskManager(include_path=tdir)
    hf_args = f"pretrained={hf},trust_remote_code=True,add_bos_token=True,dtype=float32,device=cpu"
    cases = [("generate_until, soft", "fbt_addition", f"checkpoint={ck},mode=soft", hf_args, "decode_mode=soft"),
             ("loglikelihood, standard", "fbt_addition_ll", f"checkpoint={ck},mode=standard", hf_args, None)]
    print(f"lm_eval_routes: {a.n} problems, torch threads {a.threads}, median of {a.repeats}")
    for label, task, fa, ha, gk in cases:
        times = {"fbt": [], "hf": []}
        resp = {}
        for _ in range(a.repeats):
            for route, args, g in (("fbt", fa, None), ("hf", ha, gk)):
                t0 = time.perf_counter()
                r = simple_evaluate(model=route, model_args=args, tasks=[task], task_manager=tm, log_samples=True, gen_kwargs=g,
                                   batch_size=16, bootstrap_iters=0)
                times[route].append(time.perf_counter() - t0)
                resp[route] = [s["resps"] for s in sorted(r["samples"][task], key=lambda s: s["doc_id"])]
        f, h = statistics.median(times["fbt"]), statistics.median(times["hf"])
        same = resp["fbt"] == resp["hf"] if "generate" in label else \
            max(abs(x[0][0][0] - y[0][0][0]) / abs(y[0][0][0]) for x, y in zip(resp["fbt"], resp["hf"])) < 1e-5
        print(f"  {label:26s} fbt {f:7.2f} s ({min(times['fbt']):.2f}-{max(times['fbt']):.2f})   hf {h:7.2f} s "
              f"({min(times['hf']):.2f}-{max(times['hf']):.2f})   hf/fbt {h / f:5.1f}x   responses {'equal' if same else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
