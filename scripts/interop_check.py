#!/usr/bin/env python3
"""interop_check.py: does an fbt checkpoint mean the same thing outside fbt? (spec section 8)

Two small checkpoints are trained with the fbt CLI on a generated text (blank-line separated
paragraphs; a GQA model, 4 query heads on 2 key/value heads, head_dim 24 != hidden/heads = 16):

  * a full-bandwidth one (fuser glu, feedback from 30% of the steps, so passes 2 and 3 are trained);
  * a baseline (fuser none, single-pass).

Then, against `fbt logits` (per-pass logits of a text) and `fbt sample --temperature 0` (greedy):

  peer   the independent PyTorch implementation python/fbt/hf/fbt_torch.py loads the full-bandwidth
         checkpoint: logits of pass 1, 2 and 3 (K-pass forward, no prefix mixing, no noise) within
         a relative bound, and greedy decodes in standard, soft and fused(2) mode equal token for token;
         it also loads the baseline (pass-1 logits).
  hf     Hugging Face transformers' own Qwen3ForCausalLM, built from a Qwen3Config mapped from the
         checkpoint's metadata config and loaded from the checkpoint file with from_pretrained (float32,
         eager attention): every weight equal to the file's, its logits within the same bound of fbt's
         pass-1 logits, and HF generate (do_sample=False) equal to `fbt sample --mode standard`.

Logits are defined up to a constant per row, so they are compared as log-softmax: max |logp_fbt -
logp_other| over all positions and tokens, divided by the logits' spread (the largest max - min of a
row), per pass; bound --rtol, default 2e-5 (docs/interop.md: the measured errors, 1e-6 to 5e-6, and
why the bound is what it is). A greedy decode passes when the tokens are equal; at a first difference
the other side's logit gap between the two tokens must be below what float32 can decide there (2 x
the logits bound, or 4 x that side's float32 rounding error measured against float64 along the same
tokens, which soft decoding amplifies step by step), and the line says it was a float tie.

    python3 scripts/interop_check.py --fbt build/tools/fbt
    python3 scripts/interop_check.py --fbt build/tools/fbt --keep /tmp/interop     # keep the files
    python3 scripts/interop_check.py --fbt build/tools/fbt --checkpoint-fbt RUN/checkpoint \\
                                     --checkpoint-baseline BASE/checkpoint

Hugging Face directories both ways (check_hf_dirs): transformers' save_pretrained directories
(tied, untied and sharded, float32 and bfloat16) read by fbt with transformers' logits; fbt export --hf of
the baseline and of the full-bandwidth model's plain part loaded by from_pretrained with no missing or
unexpected keys and transformers' logits equal to fbt's pass 1; the full export read back by fbt.

Sliding-window layers (check_hf_window): a transformers Qwen3 with sliding_window 32 < the probe on a mixed
stack read by fbt, and an fbt baseline trained with --window_pattern SSL --sliding_window 32 exported to
transformers: logits within the bound both ways, and HF generate equal to fbt's greedy decode far past the window.

Exit status: 0 every check passed, 1 a check failed, 77 (ctest's skip code) torch is not installed.
Without transformers the peer checks run and the HF part is reported as SKIP.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

SKIP_CODE = 77
sys.dont_write_bytecode = True  # importing python/fbt/hf/fbt_torch.py must not write into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEP = 256  # fbt's byte tokenizer: bytes 0..255, then the document separator
SEP_MARKER = b"\n<|sep|>\n"  # how `fbt sample` prints a separator

# ------------------------------------------------------------------------------------- the fixtures

MODEL_FLAGS = ["--hidden_size", "64", "--num_hidden_layers", "2", "--num_attention_heads", "4",
               "--num_key_value_heads", "2", "--head_dim", "24", "--intermediate_size", "160",
               "--max_position_embeddings", "512", "--rope_theta", "10000"]
TRAIN_FLAGS = ["--doc_split", "blank_line", "--seq_len", "64", "--batch_size", "8", "--warmup_steps", "10",
               "--eval_every", "0", "--eval_windows", "1", "--seq_eval_windows", "0", "--monitor_passes", "0",
               "--threads", "1", "--progress", "false"]

SUBJECTS = ("the quick brown fox", "a lazy dog", "the old cat", "my small bird", "the red robot", "a tired farmer")
VERBS = ("jumps over", "looks at", "runs past", "sleeps near", "sings to", "waits for")
OBJECTS = ("the fence", "a tall tree", "the river", "an empty box", "the green hill", "the sleeping bear")


def sentence(rnd: random.Random) -> str:
    return f"{rnd.choice(SUBJECTS)} {rnd.choice(VERBS)} {rnd.choice(OBJECTS)}."


def training_text(seed: int = 0, paragraphs: int = 300) -> str:
    """Paragraphs of 2-4 sentences, separated by blank lines (each one a document for fbt)."""
    rnd = random.Random(seed)
    return "\n".join(" ".join(sentence(rnd) for _ in range(rnd.randint(2, 4))) + "\n" for _ in range(paragraphs))


def probe_text(seed: int = 12345, max_bytes: int = 460) -> str:
    """Unseen sentences of the same grammar, a few hundred bytes (one document for `fbt logits`)."""
    rnd = random.Random(seed)
    s = ""
    while len(s) < max_bytes:
        s += sentence(rnd) + (" " if rnd.random() < 0.7 else "\n")
    return s[:max_bytes]


# greedy prompts: one mid-paragraph, one that ends a paragraph (its continuation starts a new document
# at once: the decoders' restart of position, attention and feedback at a separator)
PROMPTS = (("mid-paragraph", "the old cat sleeps near the river. a lazy dog"),
           ("paragraph end", "a tired farmer waits for the fence.\n"))
NEW_TOKENS = 160
FBT_MODES = ("standard", "soft", "fused(2)")

# ------------------------------------------------------------------------------------------ helpers


class Report:
    def __init__(self):
        self.failed = 0
        self.passed = 0
        self.skipped = 0

    def line(self, ok: bool, name: str, detail: str):
        self.passed += ok
        self.failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)

    def skip(self, name: str, why: str):
        self.skipped += 1
        print(f"SKIP  {name}: {why}", flush=True)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if p.returncode != 0:
        tail = (p.stderr or b"").decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(map(str, cmd[:2]))} ... exited {p.returncode}: {' | '.join(tail)}")
    return p


def read_npy(path: str):
    """A float32 / int32 little-endian C-order .npy as a torch tensor (no numpy needed)."""
    import ast
    import torch
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = raw[6]
    hl, off = (struct.unpack("<H", raw[8:10])[0], 10) if major == 1 else (struct.unpack("<I", raw[8:12])[0], 12)
    h = ast.literal_eval(raw[off:off + hl].decode("latin1"))
    dt = {"<f4": torch.float32, "<i4": torch.int32, "<f8": torch.float64, "<i8": torch.int64}[h["descr"]]
    if h["fortran_order"]:
        raise ValueError(f"{path}: Fortran order")
    return torch.frombuffer(bytearray(raw[off + hl:]), dtype=dt).reshape(h["shape"])


def rel_err(got, ref) -> tuple:
    """(error, spread): max |got - ref| / spread over positions and tokens, spread = the largest max - min
    of a row of ref's logits. Both must be real logits: the raw values are compared (and, reported in the
    same measure, their log-softmax, which is what decoding and the loss see)."""
    import torch
    g, r = got.double(), ref.double()
    spread = float((r.amax(-1) - r.amin(-1)).max())
    raw = float((g - r).abs().max()) / spread
    lsm = float((torch.log_softmax(g, -1) - torch.log_softmax(r, -1)).abs().max()) / spread
    return max(raw, lsm), spread


def check_logits(rep: Report, a, name: str, got, ref, what: str) -> float:
    """One logits check line; returns the spread (for the greedy tie bound). --inject-fault moves one
    logit of `got` by 10x the bound first (the check must then fail). A file of probabilities (rows >= 0
    summing to 1) is not logits and fails."""
    if float(got.min()) >= 0 and float((got.double().sum(-1) - 1).abs().max()) < 1e-4:
        rep.line(False, name, "the file holds probabilities (rows >= 0 summing to 1), not logits")
        return 1.0
    if a.inject_fault:
        got = got.clone()
        got[7, 11] += 10 * a.rtol * float((ref.amax(-1) - ref.amin(-1)).max())
    e, spread = rel_err(got, ref)
    rep.line(e <= a.rtol, name, f"max |diff| / logit spread = {e:.2e} (bound {a.rtol:.0e}; spread {spread:.2f}; {what})")
    return spread


def parse_sample(out: bytes, prompt: str) -> list:
    """Token ids of the continuation `fbt sample` printed (header line, prompt, continuation, newline)."""
    body = out.split(b"\n", 1)[1]
    if body.endswith(b"\n"):
        body = body[:-1]
    p = prompt.encode()
    if not body.startswith(p):
        raise ValueError("fbt sample's output does not start with the prompt")
    cont, toks, i = body[len(p):], [], 0
    while i < len(cont):
        if cont.startswith(SEP_MARKER, i):
            toks.append(SEP)
            i += len(SEP_MARKER)
        else:
            toks.append(cont[i])
            i += 1
    return toks


def show(toks: list, n: int = 40) -> str:
    s = "".join("|" if t == SEP else chr(t) for t in toks[:n])
    return repr(s + ("..." if len(toks) > n else ""))


def compare_greedy(rep: Report, name: str, fbt_toks: list, other_toks: list, logits: list, tie_bound: float,
                   rounding=None):
    """fbt's greedy tokens against another implementation's (with its logits at every step).

    Equal tokens pass. At a first difference, step i, the other side's logit gap between its token
    and fbt's is compared with what float32 can decide: the static bound 2 * rtol * spread (the
    logits checks' agreement) or, where given, 4 * rounding(i), the float32 rounding error of the
    other side's logits at that step (its float32 vs float64 gap along the same tokens; each side's
    two logits may be off by that much). Below that, the tie is float noise and the check passes,
    saying so; above it, it fails."""
    n = min(len(fbt_toks), len(other_toks))
    first = next((i for i in range(n) if fbt_toks[i] != other_toks[i]), None)
    if first is None and len(fbt_toks) != len(other_toks):
        first = n
    seps = fbt_toks.count(SEP)
    if first is None:
        margins = [float(t.topk(2).values[0] - t.topk(2).values[1]) for t in logits]
        rep.line(True, name, f"{len(fbt_toks)} tokens equal ({seps} document start(s); smallest top-2 logit margin "
                             f"{min(margins):.3g}) {show(fbt_toks)}")
        return
    if first >= len(logits) or first >= len(other_toks) or first >= len(fbt_toks):
        rep.line(False, name, f"{len(fbt_toks)} tokens from fbt, {len(other_toks)} from the other side")
        return
    lg = logits[first]
    gap = float(lg[other_toks[first]] - lg[fbt_toks[first]])
    u = rounding(first) if rounding else 0.0
    bound = max(tie_bound, 4 * u)
    where = f"token {first} of {len(fbt_toks)} (fbt {fbt_toks[first]}, other {other_toks[first]}; logit gap {gap:.3g}"
    if gap <= bound:
        why = (f"<= 4 x float32 rounding {u:.2e} there" if 4 * u >= tie_bound else f"<= {tie_bound:.2e}")
        rep.line(True, name, f"equal up to {where} {why}): a float tie, not a disagreement; "
                             f"{seps} document start(s) in fbt's tokens")
        return
    rnd = f", float32 rounding there {u:.2e}" if rounding else ""
    rep.line(False, name, f"differs at {where} > bound {bound:.2e}{rnd}): "
                          f"fbt {show(fbt_toks[first:])}, other {show(other_toks[first:])} (from token {first})")


# --------------------------------------------------------------------------------------- the checks


def train(fbt: str, text: str, out_dir: str, fuser: str, steps: int, model_flags=None) -> str:
    sched = ["--feedback_start", "0.3"] if fuser != "none" else ["--feedback_start", "1"]
    run([fbt, "train", "--data", text, "--fuser", fuser, "--steps", str(steps), "--out_dir", out_dir]
        + (model_flags or MODEL_FLAGS) + TRAIN_FLAGS + sched)
    return os.path.join(out_dir, "checkpoint")


def model_file(ck: str) -> str:
    return os.path.join(ck, "model.safetensors") if os.path.isdir(ck) else ck


def read_config(ck: str) -> dict:
    with open(model_file(ck), "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return json.loads(header["__metadata__"]["config"])


def fbt_logits(fbt: str, ck: str, text_file: str, passes: int, out: str):
    run([fbt, "logits", "--checkpoint", ck, "--text_file", text_file, "--passes", str(passes), "--out", out])
    return read_npy(out), read_npy(out[:-4] + ".tokens.npy").long()


def fbt_greedy(fbt: str, ck: str, mode: str, prompt: str, n: int) -> list:
    p = run([fbt, "sample", "--checkpoint", ck, "--prompt", prompt, "--mode", mode, "--temperature", "0",
             "--max_new_tokens", str(n)])
    return parse_sample(p.stdout, prompt)


def peer_decode(ft, m, prompt_ids: list, mode: str, n: int, forced=None, dtype=None):
    """The peer's KV-cache Decoder: greedy (forced None) or along the given tokens; returns (tokens, the
    logits (double) at every step). dtype float64: the model in double (same RoPE tables, rounded to
    float32 as fbt's), for the rounding error of the float32 run along the same tokens."""
    import torch
    dec = ft.Decoder(m)
    cache = ft.KVCache(m, 1, min(m.cfg.max_position_embeddings, len(prompt_ids) + n))
    if dtype is not None:
        cache.k = [k.to(dtype) for k in cache.k]
        cache.v = [v.to(dtype) for v in cache.v]
        cache.h = cache.h.to(dtype)
    lg = dec.prefill(cache, torch.tensor([prompt_ids]), mode)[0]
    toks, logits = [], []
    while True:
        logits.append(lg.double())
        toks.append(int(torch.argmax(lg)) if forced is None else forced[len(toks)])
        if len(toks) == n:
            return toks, logits
        lg = dec.step(cache, torch.tensor([toks[-1]]), mode)[0]


def check_peer(rep: Report, a, fbt: str, ck: str, wd: str, probe: str):
    import torch
    sys.path.insert(0, a.peer_dir)
    import fbt_torch as ft

    cfg = read_config(ck)
    try:
        m = ft.load_checkpoint(ck).eval()
    except Exception as e:  # noqa: BLE001 - the reason is the report
        rep.line(False, "peer: load full-bandwidth checkpoint", str(e))
        return
    K = 3
    ref, tok = fbt_logits(fbt, ck, probe, K, os.path.join(wd, "fbt_logits.npy"))
    T = tok.numel()
    tgt = torch.cat([tok[1:], torch.tensor([-1])])
    with torch.no_grad():
        _, _, Hs = m.kpass(tok[None], tgt[None], K=K, states=True)
    print(f"      full-bandwidth checkpoint {ck}: fuser {cfg['fuser']}, {cfg['num_attention_heads']} heads / "
          f"{cfg['num_key_value_heads']} kv heads, head_dim {cfg['head_dim']}; probe text {T} tokens")
    spread = 0.0
    for k in range(K):
        with torch.no_grad():
            got = m.logits(Hs[k])[0]
        what = "standard forward" if k == 0 else f"{k}-pass-fed-back forward, pass {k + 1} of {k + 1}"
        spread = max(spread, check_logits(rep, a, f"peer vs fbt logits, pass {k + 1}", got, ref[k], what))
    tie = 2 * a.rtol * spread
    double = []

    def m64():
        if not double:
            double.append(ft.load_checkpoint(ck).double().eval())
        return double[0]
    for pname, prompt in PROMPTS:
        for mode in FBT_MODES:
            want = fbt_greedy(fbt, ck, mode, prompt, a.new_tokens)
            if a.inject_fault and mode == "soft":
                want[5] = (want[5] + 1) % 256
            ids = [SEP] + list(prompt.encode())
            got, logits = peer_decode(ft, m, ids, mode, a.new_tokens)

            def rounding(i, ids=ids, mode=mode, want=want, logits=logits):
                _, l64 = peer_decode(ft, m64(), ids, mode, i + 1, forced=want[:i + 1], dtype=torch.float64)
                return float((logits[i] - l64[i]).abs().max())
            compare_greedy(rep, f"peer vs fbt greedy, {mode}, {pname} prompt", want, got, logits, tie, rounding)


def check_peer_baseline(rep: Report, a, ck: str, ref, tok):
    import torch
    sys.path.insert(0, a.peer_dir)
    import fbt_torch as ft
    m = ft.load_checkpoint(ck).eval()
    tgt = torch.cat([tok[1:], torch.tensor([-1])])
    with torch.no_grad():
        _, _, Hs = m.kpass(tok[None], tgt[None], K=1, states=True)
        got = m.logits(Hs[0])[0]
    check_logits(rep, a, "peer vs fbt logits, baseline (fuser none)", got, ref[0], f"{tok.numel()} tokens")


# fbt config fields that have no Qwen3Config counterpart, and why that is safe for a baseline
IGNORED = {
    "model_type": "fbt's own tag ('fbt'); the Qwen3Config's is 'qwen3'",
    "architectures": "informational",
    "initializer_range": "initialisation only (mapped anyway)",
    "z_loss": "training loss only",
    "doc_attention": "matters only across document starts; the compared sequences are one document each "
                     "(generation restarts at every separator)",
    "fuser": "must be 'none' (checked)", "feedback_source": "feedback only", "input_norm": "feedback only",
    "glu_init": "feedback only", "gated_add_alpha": "feedback only", "feedback_layer": "feedback only",
    "qk_norm": "must be true: Qwen3 always has QK-norm (checked)",
    "hidden_act": "must be silu (checked)", "attention_bias": "must be false (checked)",
}


def qwen3_config(cfg: dict, transformers):
    """fbt's metadata config -> transformers.Qwen3Config (every field that changes the math)."""
    import inspect
    problems = []
    if cfg.get("fuser", "none") != "none":
        problems.append(f"fuser {cfg['fuser']!r} (a full-bandwidth model is not a Qwen3)")
    if not cfg.get("qk_norm", True):
        problems.append("qk_norm false (Qwen3 always normalises q and k)")
    if cfg.get("hidden_act", "silu") != "silu" or cfg.get("attention_bias", False):
        problems.append("hidden_act / attention_bias")
    if problems:
        raise ValueError("not a Qwen3-compatible baseline: " + "; ".join(problems))
    D, nh = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    head_dim = int(cfg.get("head_dim") or 0) or D // nh
    kw = dict(
        vocab_size=int(cfg["vocab_size"]), hidden_size=D, intermediate_size=int(cfg["intermediate_size"]),
        num_hidden_layers=int(cfg["num_hidden_layers"]), num_attention_heads=nh,
        num_key_value_heads=int(cfg.get("num_key_value_heads") or nh), head_dim=head_dim,
        max_position_embeddings=int(cfg["max_position_embeddings"]), rms_norm_eps=float(cfg["rms_norm_eps"]),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)), attention_bias=False, hidden_act="silu",
        use_sliding_window=False, sliding_window=None, max_window_layers=int(cfg["num_hidden_layers"]),
        attention_dropout=0.0, initializer_range=float(cfg.get("initializer_range", 0.02)),
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    theta = float(cfg.get("rope_theta", 10000.0))
    params = inspect.signature(transformers.Qwen3Config.__init__).parameters
    if "rope_parameters" in params:  # transformers >= 5: RoPE settings live in rope_parameters
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    else:  # transformers 4.x
        kw["rope_theta"] = theta
        kw["rope_scaling"] = None
    c = transformers.Qwen3Config(**kw)
    # what the config ended up holding, read back (a silently dropped field must not pass)
    rp = getattr(c, "rope_parameters", None) or {}
    got_theta = rp.get("rope_theta", getattr(c, "rope_theta", None)) if isinstance(rp, dict) else getattr(c, "rope_theta", None)
    rope_type = rp.get("rope_type", "default") if isinstance(rp, dict) else "default"
    for k, v in kw.items():
        if k in ("rope_parameters", "rope_scaling", "sliding_window", "bos_token_id", "eos_token_id", "pad_token_id"):
            continue
        if getattr(c, k) != v:
            raise ValueError(f"Qwen3Config did not keep {k}: {getattr(c, k)!r} != {v!r}")
    if got_theta != theta or rope_type != "default":
        raise ValueError(f"Qwen3Config RoPE: theta {got_theta}, type {rope_type} (wanted {theta}, default)")
    unknown = sorted(set(cfg) - set(kw) - set(IGNORED) - {"rope_theta"})
    return c, unknown


def check_hf(rep: Report, a, fbt: str, ck: str, wd: str, ref, tok):
    import torch
    try:
        import transformers
        from transformers import Qwen3ForCausalLM
    except ImportError as e:
        print(f"SKIP: transformers not installed ({e}; pip install transformers): the Hugging Face Qwen3 checks did not run")
        rep.skipped += 1
        return
    transformers.logging.set_verbosity_error()
    try:
        transformers.utils.logging.disable_progress_bar()
    except AttributeError:
        pass
    cfg = read_config(ck)
    try:
        qc, unknown = qwen3_config(cfg, transformers)
    except ValueError as e:
        rep.line(False, "hf: fbt config -> Qwen3Config", str(e))
        return
    rp = getattr(qc, "rope_parameters", None)
    rep.line(not unknown, "hf: fbt config -> Qwen3Config",
             f"transformers {transformers.__version__}: vocab {qc.vocab_size}, hidden {qc.hidden_size}, "
             f"intermediate {qc.intermediate_size}, layers {qc.num_hidden_layers}, heads {qc.num_attention_heads}/"
             f"{qc.num_key_value_heads} kv, head_dim {qc.head_dim}, max_pos {qc.max_position_embeddings}, "
             f"rope {rp if rp else 'theta ' + str(qc.rope_theta)}, eps {qc.rms_norm_eps}, tied {qc.tie_word_embeddings}"
             + (f"; UNMAPPED fbt fields {unknown}" if unknown else ""))
    # HF's own loading: a directory with config.json (save_pretrained) and the checkpoint file itself
    hd = os.path.join(wd, "hf_baseline")
    os.makedirs(hd, exist_ok=True)
    qc.save_pretrained(hd)
    dst = os.path.join(hd, "model.safetensors")
    if os.path.lexists(dst):
        os.remove(dst)
    shutil.copyfile(model_file(ck), dst)
    try:
        try:
            model, info = Qwen3ForCausalLM.from_pretrained(hd, dtype=torch.float32, attn_implementation="eager",
                                                           output_loading_info=True)
        except TypeError:  # transformers 4.x spells it torch_dtype
            model, info = Qwen3ForCausalLM.from_pretrained(hd, torch_dtype=torch.float32, attn_implementation="eager",
                                                           output_loading_info=True)
    except Exception as e:  # noqa: BLE001
        rep.line(False, "hf: Qwen3ForCausalLM.from_pretrained", f"{type(e).__name__}: {e}")
        return
    model.eval()
    miss, unexp = sorted(info.get("missing_keys", [])), sorted(info.get("unexpected_keys", []))
    mism = sorted(info.get("mismatched_keys", []))
    # every HF parameter must hold the file's tensor exactly (a tied head: the embedding)
    sys.path.insert(0, a.peer_dir)
    import fbt_torch as ft
    tensors, _ = ft.read_safetensors(model_file(ck))
    sd = model.state_dict()
    differ = []
    for k, v in sd.items():
        src = tensors.get(k)
        if src is None and k == "lm_head.weight" and qc.tie_word_embeddings:
            src = tensors["model.embed_tokens.weight"]
        if src is None or tuple(src.shape) != tuple(v.shape) or not torch.equal(src.to(v.dtype), v):
            differ.append(k)
    tied = qc.tie_word_embeddings and model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    ok = not miss and not unexp and not mism and not differ and (tied or not qc.tie_word_embeddings)
    rep.line(ok, "hf: from_pretrained(fbt checkpoint)",
             f"{len(tensors)} tensors in the file, {len(sd)} in the model; missing keys {miss}, unexpected {unexp}, "
             f"mismatched {mism}; parameters not equal to the file's: {differ}; "
             f"lm_head {'tied to embed_tokens' if tied else 'own tensor'}; attention {model.config._attn_implementation}, "
             f"dtype {next(model.parameters()).dtype}")
    with torch.no_grad():
        got = model(input_ids=tok[None]).logits[0]
    spread = check_logits(rep, a, "hf Qwen3 vs fbt logits, baseline pass 1", got, ref[0], f"{tok.numel()} tokens")
    # greedy: HF generate per document (fbt's decoder restarts position and attention at a separator;
    # a plain Qwen3 has no documents, so a separator ends one generate call and starts the next)
    gen = model.generation_config
    gen.eos_token_id, gen.pad_token_id, gen.bos_token_id = None, None, None
    tie = 2 * a.rtol * spread
    for pname, prompt in PROMPTS:
        want = fbt_greedy(fbt, ck, "standard", prompt, a.new_tokens)
        if a.inject_fault:
            want[9] = (want[9] + 1) % 256
        toks, logits = hf_greedy(model, [SEP] + list(prompt.encode()), a.new_tokens)
        compare_greedy(rep, f"hf generate vs fbt greedy, standard, {pname} prompt", want, toks, logits, tie)


def hf_from_pretrained(Qwen3ForCausalLM, d):
    import torch
    try:
        return Qwen3ForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    except TypeError:  # transformers 4.x spells it torch_dtype
        return Qwen3ForCausalLM.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager", output_loading_info=True)


def check_hf_dirs(rep: Report, a, fbt: str, ck_base: str, ck_fb: str, wd: str, probe: str):
    """Hugging Face directories both ways. In: transformers writes Qwen3ForCausalLM directories
    with save_pretrained (random weights; tied and untied; one file, shards, bfloat16) and fbt's logits of
    each (fbt logits --checkpoint DIR) must match transformers' own. Out: fbt export --hf of the baseline and
    of the full-bandwidth model's plain part loads with from_pretrained with no missing or unexpected keys and
    transformers' logits match fbt's (pass 1); the full export carries model.feedback.* (reported unused)
    and fbt reads it back to the same logits of every pass, bit for bit."""
    import torch
    try:
        import transformers
        from transformers import Qwen3ForCausalLM
    except ImportError as e:
        print(f"SKIP: transformers not installed ({e}): the Hugging Face directory checks did not run")
        rep.skipped += 1
        return
    transformers.logging.set_verbosity_error()
    base_cfg = read_config(ck_base)
    qc, _ = qwen3_config(base_cfg, transformers)
    # -- in: transformers writes, fbt reads
    for name, tied, shard, dtype in (("tied, one file", True, None, torch.float32), ("untied, shards", False, "60KB", torch.float32),
                                     ("tied, bfloat16", True, None, torch.bfloat16)):
        torch.manual_seed(1 + len(name))
        c = qc.__class__(**{**qc.to_dict(), "tie_word_embeddings": tied})
        m = Qwen3ForCausalLM(c).eval()
        with torch.no_grad():  # weights of a trained model's scale, norms not all ones
            for n_, p_ in m.named_parameters():
                p_.copy_(torch.randn_like(p_) * (0.3 if "norm" in n_ else 0.05) + (1.0 if "norm" in n_ else 0.0))
        m = m.to(dtype)
        d = os.path.join(wd, "hf_in_" + name.replace(", ", "_").replace(" ", ""))
        kw = {"max_shard_size": shard} if shard else {}
        m.save_pretrained(d, safe_serialization=True, **kw)
        files = sorted(os.listdir(d))
        # the reference: transformers' own reading of the directory in float32 (m.to(bfloat16) also rounded
        # the RoPE frequencies, a buffer that from_pretrained computes afresh)
        m, _ = hf_from_pretrained(Qwen3ForCausalLM, d)
        m.eval()
        got, tok = fbt_logits(fbt, d, probe, 1, os.path.join(wd, "fbt_logits_" + os.path.basename(d) + ".npy"))
        with torch.no_grad():
            ref = m(input_ids=tok[None]).logits[0]
        check_logits(rep, a, f"hf -> fbt: save_pretrained ({name}) read by fbt, logits vs transformers'", got[0], ref,
                     f"{len(files)} files: {', '.join(files)}")
    # -- out: fbt writes, transformers reads
    for name, ck, extra, passes in (("baseline", ck_base, [], 1), ("full-bandwidth model, --plain", ck_fb, ["--plain", "true"], 1)):
        d = os.path.join(wd, "hf_out_" + ("base" if ck == ck_base else "plain"))
        run([fbt, "export", "--checkpoint", ck, "--hf", d] + extra)
        m, info = hf_from_pretrained(Qwen3ForCausalLM, d)
        m.eval()
        miss, unexp = sorted(info.get("missing_keys", [])), sorted(info.get("unexpected_keys", []))
        rep.line(not miss and not unexp, f"fbt -> hf: export --hf ({name}) from_pretrained",
                 f"missing keys {miss}, unexpected keys {unexp}")
        ref, tok = fbt_logits(fbt, ck, probe, passes, os.path.join(wd, "fbt_logits_out_" + os.path.basename(d) + ".npy"))
        with torch.no_grad():
            got = m(input_ids=tok[None]).logits[0]
        check_logits(rep, a, f"fbt -> hf: transformers' logits of the export ({name}) vs fbt pass 1", got, ref[0], f"{tok.numel()} tokens")
    d = os.path.join(wd, "hf_out_full")
    run([fbt, "export", "--checkpoint", ck_fb, "--hf", d])
    from transformers import AutoModelForCausalLM
    m, info = AutoModelForCausalLM.from_pretrained(d, trust_remote_code=True, dtype=torch.float32, output_loading_info=True)
    m.eval()
    rep.line(type(m).__name__ == "FbtForCausalLM" and not info.get("missing_keys") and not info.get("unexpected_keys"),
             "fbt -> hf: export --hf (full-bandwidth model) from_pretrained(trust_remote_code=True)",
             f"{type(m).__name__}; missing keys {sorted(info.get('missing_keys', []))}, unexpected {sorted(info.get('unexpected_keys', []))}")
    a3, tok = fbt_logits(fbt, ck_fb, probe, 3, os.path.join(wd, "fbt_logits_fb3.npy"))
    with torch.no_grad():
        for k in range(3):
            got = m(input_ids=tok[None], passes=k + 1).logits[0]
            check_logits(rep, a, f"fbt -> hf: the remote-code model's pass {k + 1} logits vs fbt's", got, a3[k], f"{tok.numel()} tokens")
    prompt = "the old cat"
    for mode in ("soft", "fused(2)"):
        want = fbt_greedy(fbt, ck_fb, mode, prompt, 48)
        x = torch.tensor([[SEP] + list(prompt.encode())])
        got = m.generate(x, max_new_tokens=48, do_sample=False, decode_mode=mode, eos_token_id=None)[0, x.shape[1]:].tolist()
        rep.line(len(want) > 0 and got[:len(want)] == want,
                 f"fbt -> hf: the remote-code model's generate() in {mode} vs fbt sample", f"{len(want)} tokens {'equal' if got[:len(want)] == want else 'DIFFER'}")
    b3, _ = fbt_logits(fbt, d, probe, 3, os.path.join(wd, "fbt_logits_fb3_exported.npy"))
    rep.line(bool(torch.equal(a3, b3)), "fbt -> hf -> fbt: the full export read back by fbt",
             f"passes 1-3 logits {'identical' if torch.equal(a3, b3) else 'DIFFER'} to the checkpoint's")


WINDOW = 32  # the sliding window of check_hf_window: well inside the probe (460 tokens) and the greedy decodes


def check_hf_window(rep: Report, a, fbt: str, text: str, ck_base: str, wd: str, probe: str):
    """Sliding-window layers (Hugging Face Qwen3's use_sliding_window / sliding_window / layer_types), window
    32 < the probe's 460 tokens, on mixed stacks. In: transformers writes a Qwen3 of layers sliding, full,
    sliding with save_pretrained and fbt's logits of the directory must match transformers' (and differ from
    the same weights with every layer full, so the window is seen). Out: fbt trains a baseline with
    --window_pattern SSL --sliding_window 32 (sliding, sliding, full: the last layer full, as nanochat's),
    export --hf loads with from_pretrained with the same layer types, transformers' logits match fbt's, and
    HF generate equals `fbt sample --mode standard` for 160 tokens (the ring KV cache far past the window)."""
    import torch
    try:
        import transformers
        from transformers import Qwen3ForCausalLM
    except ImportError as e:
        print(f"SKIP: transformers not installed ({e}): the sliding-window checks did not run")
        rep.skipped += 1
        return
    transformers.logging.set_verbosity_error()
    qc, _ = qwen3_config(read_config(ck_base), transformers)
    types = ["sliding_attention", "full_attention", "sliding_attention"]
    over = {"num_hidden_layers": 3, "use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 0, "layer_types": types}
    c = qc.__class__(**{**qc.to_dict(), **over})
    if list(c.layer_types) != types or c.sliding_window != WINDOW:
        rep.line(False, "hf window: Qwen3Config", f"did not keep layer_types {types} / sliding_window {WINDOW}: {c.layer_types}, {c.sliding_window}")
        return
    torch.manual_seed(7)
    m = Qwen3ForCausalLM(c).eval()
    with torch.no_grad():
        for n_, p_ in m.named_parameters():
            p_.copy_(torch.randn_like(p_) * (0.3 if "norm" in n_ else 0.05) + (1.0 if "norm" in n_ else 0.0))
    d = os.path.join(wd, "hf_in_window")
    m.save_pretrained(d, safe_serialization=True)
    m, _ = hf_from_pretrained(Qwen3ForCausalLM, d)
    m.eval()
    got, tok = fbt_logits(fbt, d, probe, 1, os.path.join(wd, "fbt_logits_hf_in_window.npy"))
    full = Qwen3ForCausalLM(qc.__class__(**{**qc.to_dict(), "num_hidden_layers": 3, "layer_types": ["full_attention"] * 3})).eval()
    full.load_state_dict(m.state_dict())
    with torch.no_grad():
        ref = m(input_ids=tok[None]).logits[0]
        ref_full = full(input_ids=tok[None]).logits[0]
    seen, _ = rel_err(ref_full, ref)
    check_logits(rep, a, f"hf -> fbt: save_pretrained (window {WINDOW}, layers {'/'.join(t[0].upper() for t in types)}) read by fbt, "
                         "logits vs transformers'", got[0], ref, f"{tok.numel()} tokens; the same weights without a window differ by {seen:.2e}")
    rep.line(seen > 100 * a.rtol, "hf -> fbt: the window changes transformers' logits on the probe",
             f"{seen:.2e} (> 100 x the bound {a.rtol:.1e}), so the check above sees the window")
    # -- out: fbt trains and exports a windowed baseline
    flags = list(MODEL_FLAGS)
    flags[flags.index("--num_hidden_layers") + 1] = "3"
    flags += ["--window_pattern", "SSL", "--sliding_window", str(WINDOW)]
    rd = os.path.join(wd, "run_window")
    if os.path.exists(rd):
        shutil.rmtree(rd)
    ck = train(fbt, text, rd, "none", max(1, a.steps // 2), flags)
    d = os.path.join(wd, "hf_out_window")
    run([fbt, "export", "--checkpoint", ck, "--hf", d])
    m, info = hf_from_pretrained(Qwen3ForCausalLM, d)
    m.eval()
    miss, unexp = sorted(info.get("missing_keys", [])), sorted(info.get("unexpected_keys", []))
    want = ["sliding_attention", "sliding_attention", "full_attention"]
    ok = not miss and not unexp and list(m.config.layer_types) == want and m.config.sliding_window == WINDOW and m.config.use_sliding_window
    rep.line(ok, "fbt -> hf: export --hf (window_pattern SSL, sliding_window 32) from_pretrained",
             f"layer_types {list(m.config.layer_types)}, sliding_window {m.config.sliding_window}, use_sliding_window "
             f"{m.config.use_sliding_window}; missing keys {miss}, unexpected keys {unexp}")
    ref, tok = fbt_logits(fbt, ck, probe, 1, os.path.join(wd, "fbt_logits_out_window.npy"))
    with torch.no_grad():
        got = m(input_ids=tok[None]).logits[0]
    spread = check_logits(rep, a, "fbt -> hf: transformers' logits of the windowed export vs fbt", got, ref[0], f"{tok.numel()} tokens")
    gen = m.generation_config
    gen.eos_token_id, gen.pad_token_id, gen.bos_token_id = None, None, None
    for pname, prompt in PROMPTS:
        want_toks = fbt_greedy(fbt, ck, "standard", prompt, a.new_tokens)
        if a.inject_fault:
            want_toks[9] = (want_toks[9] + 1) % 256
        toks, logits = hf_greedy(m, [SEP] + list(prompt.encode()), a.new_tokens)
        compare_greedy(rep, f"hf generate vs fbt greedy, window {WINDOW}, standard, {pname} prompt", want_toks, toks, logits, 2 * a.rtol * spread)


def hf_greedy(model, prompt_ids: list, n: int):
    """HF generate (greedy), one call per document: fbt's decoder restarts position and attention at a
    separator, a plain Qwen3 has no documents, so a separator ends one generate call (eos) and the next
    starts from it. Also every step's scores (greedy, no processors: the logits)."""
    import torch
    ctx, toks, logits = list(prompt_ids), [], []
    with torch.no_grad():
        while len(toks) < n:
            ids = torch.tensor([ctx])
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n - len(toks),
                                 do_sample=False, num_beams=1, eos_token_id=SEP, pad_token_id=SEP,
                                 output_scores=True, return_dict_in_generate=True, temperature=None, top_p=None, top_k=None)
            new = out.sequences[0, ids.shape[1]:].tolist()
            logits += [sc[0].double() for sc in out.scores]
            toks += new
            ctx = [SEP] if new and new[-1] == SEP else ctx + new
    return toks[:n], logits[:n]


# ----------------------------------------------------------------------------------------------- main


def find_fbt(given):
    for c in ([given] if given else [os.path.join(ROOT, "build", "tools", "fbt"), shutil.which("fbt")]):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fbt", default=None, help="the fbt CLI (default: build/tools/fbt, then fbt on PATH)")
    ap.add_argument("--keep", default=None, metavar="DIR", help="work in DIR and keep its files (default: a temp dir)")
    ap.add_argument("--checkpoint-fbt", default=None, help="an existing full-bandwidth checkpoint (skips its training)")
    ap.add_argument("--checkpoint-baseline", default=None, help="an existing baseline checkpoint (skips its training)")
    ap.add_argument("--steps", type=int, default=400, help="training steps of each generated checkpoint (400)")
    ap.add_argument("--new-tokens", type=int, default=NEW_TOKENS, help=f"greedy tokens per decode ({NEW_TOKENS})")
    ap.add_argument("--rtol", type=float, default=2e-5, help="bound on max |diff| / max |logit| (2e-5)")
    ap.add_argument("--no-hf", action="store_true", help="skip the Hugging Face transformers part")
    ap.add_argument("--peer-dir", default=os.path.join(ROOT, "python", "fbt", "hf"), help="where fbt_torch.py is")
    ap.add_argument("--inject-fault", action="store_true",
                    help="self-test: perturb fbt's logits (10x the bound) and one greedy token; the checks must FAIL")
    a = ap.parse_args(argv)
    t0 = time.time()
    try:
        import torch
    except ImportError:
        print("interop_check: skipped: torch is not installed (pip install torch, or apt-get install python3-torch)")
        return SKIP_CODE
    torch.set_num_threads(1)
    torch.manual_seed(0)
    fbt = find_fbt(a.fbt)
    if fbt is None:
        print(f"interop_check: FAIL: the fbt CLI {'at ' + a.fbt if a.fbt else ''} was not found (build target fbt_cli; pass --fbt)")
        return 1
    if not os.path.exists(os.path.join(a.peer_dir, "fbt_torch.py")):
        print(f"interop_check: FAIL: {a.peer_dir}/fbt_torch.py not found (--peer-dir)")
        return 1
    tmp = None
    if a.keep:
        wd = os.path.abspath(a.keep)
        os.makedirs(wd, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="fbt_interop_")
        wd = tmp.name
    rep = Report()
    print(f"interop_check: fbt {fbt}; torch {torch.__version__}; work dir {wd}{' (kept)' if a.keep else ''}")
    try:
        text = os.path.join(wd, "train.txt")
        with open(text, "w") as f:
            f.write(training_text())
        probe = os.path.join(wd, "probe.txt")
        with open(probe, "w") as f:
            f.write(probe_text())
        ck_fb, ck_base = a.checkpoint_fbt, a.checkpoint_baseline
        for name, fuser in (("fbt", "glu"), ("baseline", "none")):
            if (ck_fb if name == "fbt" else ck_base) is not None:
                continue
            d = os.path.join(wd, f"run_{name}")
            if os.path.exists(d):
                shutil.rmtree(d)
            t = time.time()
            ck = train(fbt, text, d, fuser, a.steps)
            print(f"      trained {name} ({fuser}) with fbt train: {a.steps} steps, {time.time() - t:.1f} s -> {ck}")
            if name == "fbt":
                ck_fb = ck
            else:
                ck_base = ck
        check_peer(rep, a, fbt, ck_fb, wd, probe)
        ref, tok = fbt_logits(fbt, ck_base, probe, 1, os.path.join(wd, "fbt_logits_baseline.npy"))
        check_peer_baseline(rep, a, ck_base, ref, tok)
        if a.no_hf:
            rep.skip("hf", "--no-hf")
        else:
            check_hf(rep, a, fbt, ck_base, wd, ref, tok)
            check_hf_dirs(rep, a, fbt, ck_base, ck_fb, wd, probe)
            check_hf_window(rep, a, fbt, text, ck_base, wd, probe)
    except Exception as e:  # noqa: BLE001 - a crash is a failure with its reason
        import traceback
        traceback.print_exc()
        rep.line(False, "interop_check", f"{type(e).__name__}: {e}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    verdict = "PASS" if rep.failed == 0 else "FAIL"
    print(f"interop_check: {verdict}: {rep.passed} passed, {rep.failed} failed, {rep.skipped} skipped "
          f"({time.time() - t0:.1f} s)")
    return 0 if rep.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
