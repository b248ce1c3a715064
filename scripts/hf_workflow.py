#!/usr/bin/env python3
"""hf_workflow.py: the bring-your-own-checkpoint workflow of docs/interop.md, end to end.

A researcher has a Hugging Face Qwen3 model and its tokenizer, and wants to add latent feedback to it.
This script plays every part with real files and the fbt command:

  1. tokenizer   a byte-level BPE tokenizer (the `tokenizers` package) trained on the corpus, saved as
                 tokenizer.json: it stands in for the model's own tokenizer;
  2. tokenize    scripts/fbt_tokenize.py turns the corpus into train.bin / val.bin (uint16 ids, the
                 tokenizer's end-of-text id before each document);
  3. pretrain    transformers' Qwen3ForCausalLM (random init, that vocabulary) trained with torch on
                 train.bin, saved with save_pretrained: the "standard pretraining checkpoint";
  4. evaluate    fbt eval of that directory on val.bin, beside torch's loss on the same windows;
  5. continue    fbt train --init_from DIR twice, on the same tokens and steps: with feedback
                 (--preset paper --fuser glu) and plain (--fuser none), so the comparison is fair;
  6. export      fbt export --hf of the feedback run's plain part, loaded by from_pretrained (no missing or
                 unexpected keys); transformers' greedy continuation of a prompt against fbt sample's;
  7. sample      fbt sample --prompt_ids ... --output ids of the full-bandwidth model, decoded with the
                 tokenizer.

    python3 scripts/hf_workflow.py --fbt build/tools/fbt --corpus CORPUS.txt [--work DIR] [--steps N]

Needs torch, transformers and tokenizers (fbt itself needs none of them): exit 77 (ctest's skip) when
one is missing. Exit 1 when a check fails. Without --corpus the docs of this repository are the corpus.
"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd, log):
    print("$ " + " ".join(cmd), flush=True)
    t = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout
    log.append((cmd, out))
    tail = out.strip().splitlines()[-6:]
    for line in tail:
        print("    " + line)
    print("    (%.1f s)" % (time.time() - t), flush=True)
    if p.returncode != 0:
        print(out)
        sys.exit("hf_workflow.py: command failed (exit %d): %s" % (p.returncode, " ".join(cmd)))
    return out


def read_ids(path):
    with open(path, "rb") as f:
        raw = f.read()
    return list(struct.unpack("<%dH" % (len(raw) // 2), raw))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fbt", required=True)
    ap.add_argument("--corpus", default="")
    ap.add_argument("--work", default="")
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--pretrain_steps", type=int, default=300)
    ap.add_argument("--steps", type=int, default=200, help="fbt steps of each continuation")
    ap.add_argument("--seq_len", type=int, default=64)
    a = ap.parse_args()
    try:
        import torch
        import transformers
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except ImportError as e:
        print("SKIP: hf_workflow.py needs torch, transformers and tokenizers (%s)" % e)
        return 77
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    work = a.work or tempfile.mkdtemp(prefix="fbt_hf_workflow_")
    os.makedirs(work, exist_ok=True)
    for d in ("base", "fb", "plain", "fb_hf", "fb_hf_full"):
        shutil.rmtree(os.path.join(work, d), ignore_errors=True)
    corpus = a.corpus
    if not corpus:
        corpus = os.path.join(work, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            for p in sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)):
                f.write(open(p, encoding="utf-8").read() + "\n\n")
    log, fails = [], []
    T = a.seq_len

    # 1. a tokenizer of the model's own (byte-level BPE)
    tokdir = os.path.join(work, "tokenizer")
    os.makedirs(tokdir, exist_ok=True)
    text = open(corpus, encoding="utf-8", errors="replace").read()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], trainers.BpeTrainer(vocab_size=a.vocab, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.save(os.path.join(tokdir, "tokenizer.json"))
    V, eos = tok.get_vocab_size(), tok.token_to_id("<|endoftext|>")
    print("1. tokenizer: byte-level BPE, vocabulary %d, <|endoftext|> = %d" % (V, eos))

    # 2. tokenize
    train_bin, val_bin = os.path.join(work, "train.bin"), os.path.join(work, "val.bin")
    run([sys.executable, os.path.join(HERE, "fbt_tokenize.py"), "--tokenizer", tokdir, "--input", corpus, "--output", train_bin,
         "--val_output", val_bin, "--val_fraction", "0.05"], log)
    train, val = read_ids(train_bin), read_ids(val_bin)

    # 3. pretrain a Qwen3 with transformers / torch on the token file
    qc = Qwen3Config(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                     intermediate_size=192, max_position_embeddings=256, rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                     attention_dropout=0.0)
    model = Qwen3ForCausalLM(qc)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    data = torch.tensor(train, dtype=torch.long)
    g = torch.Generator().manual_seed(1)
    t0 = time.time()
    for step in range(a.pretrain_steps):
        starts = torch.randint(0, len(train) - T - 1, (16,), generator=g)
        x = torch.stack([data[s:s + T] for s in starts])
        y = torch.stack([data[s + 1:s + T + 1] for s in starts])
        for pg in opt.param_groups:
            pg["lr"] = 3e-3 * min(1.0, (step + 1) / 20)
        loss = torch.nn.functional.cross_entropy(model(input_ids=x).logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    base = os.path.join(work, "base")
    model.eval()
    model.save_pretrained(base, safe_serialization=True)
    print("3. pretrained Qwen3ForCausalLM (vocabulary %d, D 64, 2 layers) %d steps of 16 x %d tokens with torch: last loss %.3f (%.0f s); "
          "saved with save_pretrained in %s" % (V, a.pretrain_steps, T, loss.item(), time.time() - t0, base))

    # 4. fbt evaluates the Hugging Face directory; torch scores the same windows (the validation file cut at
    #    stride T). fbt masks attention at each <|endoftext|> and HF does not, so the two losses differ by
    #    what the context across a document start is worth: checked within 2% (the logits themselves are
    #    checked to float rounding by interop_check.py)
    common = ["--data", train_bin, "--val_data", val_bin, "--doc_sep_id", str(eos), "--seq_len", str(T)]
    out = run([a.fbt, "eval", "--checkpoint", base] + common + ["--windows", "0", "--seq_windows", "0", "--monitor", "0"], log)
    fbt_base = float(re.search(r"pass 1 validation loss ([0-9.]+)", out).group(1))
    vt = torch.tensor(val, dtype=torch.long)
    n_w = (len(val) - 1) // T
    with torch.no_grad():
        tot, cnt = 0.0, 0
        for i in range(n_w):
            w = vt[i * T:i * T + T + 1]
            lg = model(input_ids=w[:-1].unsqueeze(0)).logits[0]
            tot += torch.nn.functional.cross_entropy(lg, w[1:], reduction="sum").item()
            cnt += T
    print("4. validation loss of the pretrained model over %d windows of %d: fbt eval %.4f, torch %.4f (torch attends across "
          "documents, fbt masks at <|endoftext|>)" % (n_w, T, fbt_base, tot / cnt))
    if not abs(fbt_base - tot / cnt) <= 0.02 * (tot / cnt):
        fails.append("fbt eval of the pretrained directory (%.4f) is not within 2%% of torch's loss (%.4f)" % (fbt_base, tot / cnt))

    # 5. continue with feedback, and plain, from the same checkpoint on the same tokens
    cont = common + ["--steps", str(a.steps), "--batch_size", "16", "--warmup_steps", "10", "--lr", "1e-3", "--eval_every", "0",
                     "--eval_windows", "0", "--seq_eval_windows", "8", "--monitor_passes", "0", "--progress", "false"]
    out_fb = run([a.fbt, "train", "--init_from", base, "--preset", "paper", "--fuser", "glu", "--out_dir", os.path.join(work, "fb")] + cont, log)
    out_pl = run([a.fbt, "train", "--init_from", base, "--preset", "paper", "--fuser", "none", "--out_dir", os.path.join(work, "plain")] + cont, log)
    if "initialised from " + base not in out_fb:
        fails.append("the feedback run does not say it was initialised from the checkpoint")

    def last_eval(out):
        lines = [l.strip() for l in out.splitlines() if "eval @" in l]
        return lines[-1] if lines else "(no evaluation line)"

    print("5. continued %d steps from %s:\n   with feedback: %s\n   plain:         %s" % (a.steps, base, last_eval(out_fb), last_eval(out_pl)))

    # 6. export the feedback run's plain part; transformers loads it with no missing or unexpected keys
    fb_ck = os.path.join(work, "fb", "checkpoint")
    run([a.fbt, "export", "--checkpoint", fb_ck, "--hf", os.path.join(work, "fb_hf"), "--plain", "true"], log)
    run([a.fbt, "export", "--checkpoint", fb_ck, "--hf", os.path.join(work, "fb_hf_full")], log)
    m2, info = Qwen3ForCausalLM.from_pretrained(os.path.join(work, "fb_hf"), output_loading_info=True, torch_dtype=torch.float32)
    missing, unexpected = list(info["missing_keys"]), list(info["unexpected_keys"])
    print("6. from_pretrained of the exported plain part: missing keys %s, unexpected keys %s" % (missing, unexpected))
    if missing or unexpected:
        fails.append("from_pretrained reported missing %s / unexpected %s" % (missing, unexpected))
    at = next(i for i in range(len(val) - 40) if eos not in val[i:i + 40])  # a prompt inside a document
    prompt = val[at:at + 12]
    with torch.no_grad():
        hf_ids = m2.eval().generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, pad_token_id=eos)[0, len(prompt):].tolist()
    out = run([a.fbt, "sample", "--checkpoint", os.path.join(work, "fb_hf"), "--prompt_ids", ",".join(map(str, prompt)), "--output", "ids",
               "--sep_id", str(eos), "--temperature", "0", "--max_new_tokens", "12", "--mode", "standard"], log)
    fbt_ids = [int(x) for x in out.strip().splitlines()[-1].split(",")]
    # fbt stops a document at a separator and HF's generate at eos: compare up to the first one
    if eos in hf_ids:
        hf_ids = hf_ids[:hf_ids.index(eos) + 1]
    same = fbt_ids[:len(hf_ids)] == hf_ids
    print("   greedy continuation of a 12-token prompt: transformers %s, fbt %s: %s" % (hf_ids, fbt_ids, "identical" if same else "DIFFERENT"))
    if not same:
        fails.append("greedy continuations differ")

    # 7. sample the full-bandwidth model from token ids, decode with the tokenizer
    out = run([a.fbt, "sample", "--checkpoint", os.path.join(work, "fb_hf_full"), "--prompt_ids", ",".join(map(str, prompt)), "--output", "ids",
               "--sep_id", str(eos), "--temperature", "0", "--max_new_tokens", "24"], log)
    ids = [int(x) for x in out.strip().splitlines()[-1].split(",")]
    print("7. fbt sample (soft) of the full-bandwidth model: %r -> %r" % (tok.decode(prompt), tok.decode(ids)))
    with open(os.path.join(work, "hf_workflow.log"), "w") as f:
        for cmd, o in log:
            f.write("$ " + " ".join(cmd) + "\n" + o + "\n")
    print("files in %s; every command's output in hf_workflow.log" % work)
    if fails:
        print("FAIL: " + "; ".join(fails))
        return 1
    print("hf_workflow: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
