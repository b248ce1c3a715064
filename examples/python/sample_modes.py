#!/usr/bin/env python3
"""Sample from one model in every decoding mode: standard, soft and fused(k).

    python examples/python/sample_modes.py [--checkpoint runs/py_running_sum/checkpoint] [--steps 60]

Without --checkpoint it first trains a tiny model on task:running_sum for --steps steps (a few seconds).
The modes differ in what the next input is built from (docs/decoding.md): standard feeds the token alone
(a plain transformer), soft feeds the token fused with the previous position's top state (the model's
own recurrence, as trained), fused(k) prefills the prompt with k fused passes and then decodes as soft.
Greedy decoding is deterministic; a temperature > 0 samples with the given seed.
"""
import argparse
import shutil
import sys

import fbt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out_dir", default="runs/py_sample_modes")
    ap.add_argument("--prompt", default="0123401234")
    ap.add_argument("--max_new_tokens", type=int, default=24)
    a = ap.parse_args()

    ckpt = a.checkpoint
    if not ckpt:
        shutil.rmtree(a.out_dir, ignore_errors=True)
        r = fbt.train(data="task:running_sum", steps=a.steps, batch_size=4, seq_len=32, hidden_size=32,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64,
                      max_position_embeddings=128, feedback_start=0.2, warmup_steps=5, eval_every=0,
                      seq_eval_windows=0, monitor_passes=0, eval_windows=1, progress=False,
                      out_dir=a.out_dir, verbose=False)
        ckpt = r.checkpoint
    model = fbt.Model.load(ckpt)
    dec = fbt.Decoder(model)
    print(f"model {ckpt}; prompt {a.prompt!r}")
    for mode in ["standard", "soft", "fused(1)", "fused(2)"]:
        out = dec.generate(a.prompt, mode=mode, max_new_tokens=a.max_new_tokens, greedy=True)
        print(f"  {mode:9s} greedy      {fbt.decode(out).decode('utf-8', 'replace')!r}")  # out: (new,) int32
    out = dec.generate(a.prompt, mode="soft", max_new_tokens=a.max_new_tokens, temperature=0.8, top_k=8, seed=1, n=2)
    for i, row in enumerate(out):  # n = 2: a list of two arrays
        print(f"  soft      T=0.8 #{i}    {fbt.decode(row).decode('utf-8', 'replace')!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
