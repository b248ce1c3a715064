#!/usr/bin/env python3
"""fbt's per-pass logits against the PyTorch reference (python/fbt/hf/fbt_torch.py) on the same weights.

    python examples/python/compare_torch.py [--checkpoint CKPT] [--passes 3]

Without --checkpoint a tiny model is trained for a few steps first. Both read the same checkpoint file;
the tokens are one text through the byte tokenizer. fbt's model.logits returns (K, B, T, V) with pass k's
logits in row k-1 (no copy of the library's buffer); the peer runs its own K-pass forward (kpass with
states=True) and its head. fp32 on both sides, two independent implementations: they agree to rounding
(the check uses a relative tolerance of 1e-4 on the largest logit difference). Exits 0 when they agree,
1 when not, and skips (exit 0, with a message) when torch is not installed.
"""
import argparse
import os
import shutil
import sys

import numpy as np

import fbt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "fbt", "hf"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--out_dir", default="runs/py_compare_torch")
    ap.add_argument("--text", default="The running sum of 3, 1 and 4 is 8.\n")
    ap.add_argument("--rtol", type=float, default=1e-4)
    a = ap.parse_args()
    try:
        import torch
        import fbt_torch
    except ImportError as e:
        print(f"skipped: {e} (pip install torch to compare with the PyTorch reference)")
        return 0

    ckpt = a.checkpoint
    if not ckpt:
        shutil.rmtree(a.out_dir, ignore_errors=True)
        ckpt = fbt.train(data="task:running_sum", steps=10, batch_size=2, seq_len=32, hidden_size=32,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                         max_position_embeddings=64, feedback_start=0.0, warmup_steps=2, eval_every=0,
                         seq_eval_windows=0, monitor_passes=0, eval_windows=1, progress=False,
                         out_dir=a.out_dir, verbose=False).checkpoint
    model = fbt.Model.load(ckpt)
    tokens = np.frombuffer(a.text.encode(), dtype=np.uint8).astype(np.int32)[None, :]  # (B=1, T)
    ours = model.logits(tokens, passes=a.passes)  # (K, 1, T, V)

    peer = fbt_torch.load_checkpoint(ckpt)
    with torch.no_grad():
        t = torch.from_numpy(tokens.astype(np.int64))
        _, _, hs = peer.kpass(t, torch.full_like(t, -1), K=a.passes, states=True)
        theirs = np.stack([peer.logits(h).numpy() for h in hs])  # (K, 1, T, V)

    ok = True
    for k in range(a.passes):
        d = np.abs(ours[k] - theirs[k]).max()
        scale = np.abs(theirs[k]).max()
        good = d <= a.rtol * scale
        ok &= bool(good)
        print(f"pass {k + 1}: max |fbt - torch| = {d:.3e} (largest logit {scale:.3f}): {'agree' if good else 'DIFFER'}")
    print("fbt and the PyTorch reference agree" if ok else "fbt and the PyTorch reference differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
