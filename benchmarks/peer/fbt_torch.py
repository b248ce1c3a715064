"""fbt_torch: an independent PyTorch implementation of the fbt model (the benchmark peer).

The model of docs/spec.md sections 1-4, 8, 9, written as a researcher would write it in
current PyTorch (fp32, CPU): a Qwen3-style decoder (pre-norm RMSNorm with eps 1e-6, per-head QK-norm
before rotate-half RoPE with positions from 0, grouped-query attention through
F.scaled_dot_product_attention, SwiGLU, tied head) whose stack takes layer-0 input vectors; the
input norm N_in; the three feedback fusers (glu, gated_add, concat); the K-pass objective of spec
section 3 (shift_right, per-row prefix, jitter, detach, grad_passes); and a KV-cached decoder with an
explicit, preallocated cache in the modes standard, soft and fused(k).

It reads fbt checkpoints (safetensors with the model config as JSON under __metadata__["config"]) with
a small reader of its own (json + torch.frombuffer; no dependency on the `safetensors` package), so the
peer can start from exactly the weights fbt initialised ("same init"), and it writes its gradients and
losses for the cross-check (check_peer.py).

Mixed precision (bench_peer.py --precision bf16): `autocast(torch.bfloat16)` around the forward and the
loss, the stock `torch.autocast("cpu", dtype=torch.bfloat16)`: the products (nn.Linear / F.linear, the
head, scaled_dot_product_attention) run with bf16 operands, master weights, gradients and the optimizer
stay fp32. Two lines keep the rest fp32 as in fbt's bf16 mode (and as Hugging Face's Qwen3 does): the
RMSNorms upcast their input (`x.float()`; also keeps F.rms_norm on its fused kernel, which refuses a bf16
input with an fp32 weight) and the loss upcasts the logits. Both are no-ops in fp32.

Optional tooling: nothing in fbt needs this file or torch.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field, fields
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

SEP = 256  # fbt's byte tokenizer: bytes 0..255 + the document separator

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16}


def autocast(dtype: Optional[torch.dtype]):
    """torch.autocast on the CPU with dtype (torch.bfloat16), or a disabled one for None (fp32): the same
    context in both precisions, so torch.compile traces the same code (autocast inside the compiled function)."""
    return torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None)

# ------------------------------------------------------------------------------------------- config


@dataclass
class Config:
    """The fbt ModelConfig (field names as in include/fbt/model/config.hpp and the checkpoint JSON)."""
    vocab_size: int = 257
    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    head_dim: int = 0
    intermediate_size: int = 384
    max_position_embeddings: int = 4096
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = True
    qk_norm: bool = True
    initializer_range: float = 0.02
    z_loss: float = 0.0
    doc_attention: str = "masked"
    fuser: str = "glu"
    feedback_source: str = "post_final_norm"
    input_norm: str = "all"
    glu_init: str = "default"
    gated_add_alpha: float = 0.1

    @property
    def hs(self) -> int:
        return self.head_dim if self.head_dim > 0 else self.hidden_size // self.num_attention_heads

    @property
    def feedback(self) -> bool:
        return self.fuser != "none"

    @staticmethod
    def from_dict(d: dict) -> "Config":
        names = {f.name for f in fields(Config)}
        c = Config(**{k: v for k, v in d.items() if k in names and v is not None})
        if d.get("model_type") == "qwen3" and "fuser" not in d:
            c.fuser = "none"
        return c

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(Config)}
        d["head_dim"] = self.hs
        return d


# The benchmark configurations (byte vocabulary 257).
BENCH_CONFIGS = {
    "tiny": dict(model=dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                            intermediate_size=384), T=128, B=16),
    "small": dict(model=dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
                             intermediate_size=768), T=256, B=8),
}


def bench_config(name: str, fuser: str = "glu") -> Tuple[Config, int, int]:
    """(Config, T, B) of a named benchmark configuration."""
    c = BENCH_CONFIGS[name]
    return Config(fuser=fuser, **c["model"]), c["T"], c["B"]


# -------------------------------------------------------------------------------------- safetensors

_DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
           "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}
_NAMES = {v: k for k, v in _DTYPES.items()}


def read_safetensors(path: str) -> Tuple[Dict[str, torch.Tensor], Dict[str, str]]:
    """Reads a safetensors file: ({name: tensor}, metadata). Little-endian host assumed."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > 100_000_000 or 8 + n > len(raw):
        raise ValueError(f"{path}: bad header length {n}")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, e in header.items():
        if e["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {e['dtype']}")
        b, end = e["data_offsets"]
        dt = _DTYPES[e["dtype"]]
        count = math.prod(e["shape"]) if e["shape"] else 1
        if end - b != count * torch.empty((), dtype=dt).element_size():
            raise ValueError(f"{path}: tensor {name}: data_offsets do not match its shape")
        t = torch.frombuffer(bytearray(data[b:end]), dtype=dt, count=count) if count else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"])
    return out, meta


def write_safetensors(path: str, tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes tensors (contiguous, row-major) and string metadata as a safetensors file."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        b = t.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    import os
    os.replace(path + ".tmp", path)


# ------------------------------------------------------------------------------------------- layers


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """x in fp32 when it is of a lower precision (a bf16 product's output under autocast); fp32 and fp64
    (the interop check runs the model in double) are left as they are."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """In at least fp32 whatever the input (a bf16 product's output under autocast)."""
    return F.rms_norm(at_least_fp32(x), (x.shape[-1],), w, eps)


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def rope_tables(max_pos: int, hs: int, theta: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (max_pos, hs): computed in double, rounded to fp32 (as fbt's RopeTable), halves repeated."""
    half = hs // 2
    i = torch.arange(half, dtype=torch.float64)
    f = theta ** (-2.0 * i / hs)
    a = torch.arange(max_pos, dtype=torch.float64)[:, None] * f[None, :]
    cos, sin = torch.cos(a).float(), torch.sin(a).float()
    return torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def apply_rope(x, cos, sin):
    """x (..., T, hs); cos, sin broadcastable to it."""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.nh, self.nkv, self.hs = c.num_attention_heads, c.num_key_value_heads, c.hs
        D = c.hidden_size
        self.q_proj = nn.Linear(D, self.nh * self.hs, bias=False)
        self.k_proj = nn.Linear(D, self.nkv * self.hs, bias=False)
        self.v_proj = nn.Linear(D, self.nkv * self.hs, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hs, D, bias=False)
        self.qk_norm = c.qk_norm
        if c.qk_norm:
            self.q_norm = RMSNorm(self.hs, c.rms_norm_eps)
            self.k_norm = RMSNorm(self.hs, c.rms_norm_eps)
        self.gqa = self.nh != self.nkv

    def qkv(self, x, cos, sin):
        """q (B, NH, T, hs), k, v (B, NKV, T, hs): after QK-norm and RoPE (k, v as the cache holds them)."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hs)
        k = self.k_proj(x).view(B, T, self.nkv, self.hs)
        v = self.v_proj(x).view(B, T, self.nkv, self.hs).transpose(1, 2)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def attend(self, q, k, v, mask):
        """mask None: causal (q and k of the same length); a bool tensor: allowed positions; False: none."""
        if mask is None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.gqa)
        elif mask is False:
            o = F.scaled_dot_product_attention(q, k, v, enable_gqa=self.gqa)
        else:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.gqa)
        B, _, T, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.hs))

    def forward(self, x, cos, sin, mask=None, kv_out=None):
        q, k, v = self.qkv(x, cos, sin)
        if kv_out is not None:
            kv_out.append((k, v))
        return self.attend(q, k, v, mask)


class MLP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        D, Fh = c.hidden_size, c.intermediate_size
        self.gate_proj = nn.Linear(D, Fh, bias=False)
        self.up_proj = nn.Linear(D, Fh, bias=False)
        self.down_proj = nn.Linear(Fh, D, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask=None, kv_out=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, kv_out)
        return x + self.mlp(self.post_attention_layernorm(x))


class Feedback(nn.Module):
    """N_in and the fuser (spec section 2). Parameter names are the checkpoint's under model.feedback."""

    def __init__(self, c: Config):
        super().__init__()
        D, eps = c.hidden_size, c.rms_norm_eps
        self.kind, self.eps, self.alpha = c.fuser, eps, c.gated_add_alpha
        self.in_norm = RMSNorm(D, eps)
        self.gate_norm = RMSNorm(D, eps)
        if self.kind == "glu":
            self.w_u = nn.Linear(D, D, bias=False)
            self.w_g = nn.Linear(D, D, bias=False)
        elif self.kind == "gated_add":
            self.w_g = nn.Linear(2 * D, D, bias=True)
            self.w_s = nn.Linear(D, D, bias=False)
            self.state_norm = RMSNorm(D, eps)
        elif self.kind == "concat":
            self.w_c = nn.Linear(2 * D, D, bias=False)
            self.state_norm = RMSNorm(D, eps)
        else:
            raise ValueError(f"unknown fuser {self.kind!r}")
        self.D = D

    def shared(self, e):
        """The e-only part of the fuser (the same in every pass of a step): computed once."""
        D, ng = self.D, self.gate_norm(e)
        if self.kind == "glu":
            return F.linear(ng, self.w_g.weight)
        if self.kind == "gated_add":
            return F.linear(ng, self.w_g.weight[:, :D], self.w_g.bias)
        return F.linear(ng, self.w_c.weight[:, D:])

    def fuse(self, s, e, pe):
        """Fuse(s, e) given pe = shared(e)."""
        D = self.D
        if self.kind == "glu":
            return self.w_u(s) * torch.sigmoid(pe)
        ns = self.state_norm(s)
        if self.kind == "gated_add":
            z = pe + F.linear(ns, self.w_g.weight[:, D:])
            return e + self.alpha * torch.sigmoid(z) * self.w_s(ns)
        return pe + F.linear(ns, self.w_c.weight[:, :D])


class Inner(nn.Module):
    """Holds the parameters under the Hugging Face Qwen3 names (model.*)."""

    def __init__(self, c: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Block(c) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        if c.feedback:
            self.feedback = Feedback(c)


# -------------------------------------------------------------------------------------------- model


class FBT(nn.Module):
    """The full-bandwidth transformer. state_dict() names are fbt's checkpoint names."""

    def __init__(self, c: Config):
        super().__init__()
        self.cfg = c
        self.model = Inner(c)
        if not c.tie_word_embeddings:
            self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        cos, sin = rope_tables(c.max_position_embeddings, c.hs, c.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    # ---- weights
    def init_weights(self, seed: int = 0):
        """Spec init (N(0, 0.02^2), o/down_proj std/sqrt(2L), norms 1, fuser inits), torch's own RNG.
        For "same init" as fbt, load fbt's initial checkpoint instead (load_checkpoint)."""
        c, g = self.cfg, torch.Generator().manual_seed(seed)
        std, out_std = c.initializer_range, c.initializer_range / math.sqrt(2 * c.num_hidden_layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                elif name.endswith(("o_proj.weight", "down_proj.weight")):
                    p.normal_(0, out_std, generator=g)
                elif name.startswith("model.feedback."):
                    continue
                else:
                    p.normal_(0, std, generator=g)
            if c.feedback:
                fb, D = self.model.feedback, c.hidden_size
                eye = torch.eye(D)
                if c.fuser == "glu":
                    if c.glu_init == "fan_in":
                        fb.w_u.weight.normal_(0, 1 / math.sqrt(D), generator=g)
                        fb.w_g.weight.normal_(0, 1 / math.sqrt(D), generator=g)
                    else:
                        fb.w_u.weight.copy_(eye)
                        if c.glu_init == "identity_both":
                            fb.w_g.weight.copy_(eye)
                        else:
                            fb.w_g.weight.normal_(0, math.sqrt(1e-6 / D), generator=g)
                elif c.fuser == "gated_add":
                    fb.w_g.weight.normal_(0, std, generator=g)
                    fb.w_g.bias.zero_()
                    fb.w_s.weight.zero_()
                else:
                    fb.w_c.weight.zero_()
                    fb.w_c.weight[:, D:] = eye
        return self

    def load_tensors(self, tensors: Dict[str, torch.Tensor]):
        sd = self.state_dict()
        extra = set(tensors) - set(sd)
        if self.cfg.tie_word_embeddings and "lm_head.weight" in extra:
            extra.discard("lm_head.weight")
        missing = set(sd) - set(tensors)
        if extra or missing:
            raise ValueError(f"checkpoint mismatch: unknown {sorted(extra)}, missing {sorted(missing)}")
        with torch.no_grad():
            for k, p in sd.items():
                if tuple(tensors[k].shape) != tuple(p.shape):
                    raise ValueError(f"tensor {k}: shape {tuple(tensors[k].shape)}, expected {tuple(p.shape)}")
                p.copy_(tensors[k].to(p.dtype))
        return self

    def save(self, path: str):
        sd = {k: v for k, v in self.state_dict().items()}
        write_safetensors(path, sd, {"format": "pt", "config": json.dumps(self.cfg.to_dict())})

    # ---- pieces
    @property
    def head_weight(self):
        return self.model.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight

    def plain_input(self, e):
        """Layer-0 input of a plain position: N_in(e) (input_norm all), else e."""
        if self.cfg.feedback and self.cfg.input_norm == "all":
            return self.model.feedback.in_norm(e)
        return e

    def fused_input(self, S, e, pe, fed):
        """X = N_in(Fuse(S, e)) where fed (B, T) is true, the plain input elsewhere."""
        fb = self.model.feedback
        u = fb.fuse(S, e, pe)
        m = fed.unsqueeze(-1)
        if self.cfg.input_norm == "all":
            return fb.in_norm(torch.where(m, u, e))
        return torch.where(m, fb.in_norm(u), e)

    def stack(self, X, pos=None, mask=None, kv_out=None):
        """(H = FinalNorm(Stack(X)), last residual R). pos: (T) or (B, 1, T) RoPE positions (None: 0..T-1)."""
        T = X.shape[1]
        if pos is None:
            cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        else:
            cos, sin = self.rope_cos[pos], self.rope_sin[pos]
        x = X
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask, kv_out)
        return self.model.norm(x), x

    def source(self, H, R):
        return H if self.cfg.feedback_source == "post_final_norm" else R

    def logits(self, H):
        return F.linear(H, self.head_weight)

    def ce(self, H, targets):
        """Mean next-token CE over targets >= 0 (+ optional z-loss)."""
        lg = at_least_fp32(self.logits(H).flatten(0, 1))  # the loss in fp32 at least (bf16 logits under autocast)
        t = targets.flatten()
        if self.cfg.z_loss == 0:
            return F.cross_entropy(lg, t, ignore_index=-1)
        lse = torch.logsumexp(lg, -1)
        keep = t >= 0
        nll = lse - lg.gather(1, t.clamp(min=0)[:, None])[:, 0]
        return ((nll + self.cfg.z_loss * lse * lse) * keep).sum() / keep.sum()

    @staticmethod
    def doc_layout(doc_start, T, masked):
        """From doc_start (B, T) bool: (plain (B, T), pos (B, 1, T) or None, attention mask (B, 1, T, T) or None)."""
        if doc_start is None or not bool(doc_start[:, 1:].any()):
            return None, None, None
        B = doc_start.shape[0]
        ds = doc_start.clone()
        ds[:, 0] = True
        t = torch.arange(T)
        start = torch.cummax(torch.where(ds, t, torch.zeros_like(t)), dim=1).values  # (B, T)
        if not masked:
            return ds, None, None
        pos = (t - start).unsqueeze(1)
        allowed = (t[None, None, :] >= start[:, :, None]) & (t[None, None, :] <= t[None, :, None])
        return ds, pos, allowed.unsqueeze(1)

    # ---- the K-pass objective (spec section 3)
    def forward_pass(self, X, pos=None, mask=None):
        """The stack on layer-0 inputs X (B, T, D): the final-norm output H."""
        return self.stack(X, pos, mask)[0]

    def kpass(self, tokens, targets, K=1, lam=1.0, sigma=0.0, prefix=None, detach=False, grad_passes=0,
              doc_start="separator", generator=None, states=False, noise=None):
        """The K-pass objective: (objective, [loss_1..loss_K]) (losses as 0-dim tensors).

        prefix: None (no prefix mixing), "uniform" (p ~ U{0..T-1} per sequence per pass), an int, or a
        (K, B) tensor (row 0 unused). Position 0 and document starts are always plain. grad_passes g:
        passes 1..K-g run under no_grad. detach: stop-gradient on the carried state. sigma: jitter
        U(-sigma, sigma) per element, added to the carried state before shift_right; or pass noise,
        a list whose entry j (j >= 1) is pass j's jitter (B, T, D) drawn by the caller (torch.compile
        traces no RNG then). doc_start: (B, T) bool, None (one document per row), or "separator" (fbt's default,
        as fbt.Model.logits and `fbt logits`: with the byte vocabulary a separator token starts a document)."""
        c = self.cfg
        B, T = tokens.shape
        if isinstance(doc_start, str):
            if doc_start != "separator":
                raise ValueError("doc_start: a (B, T) bool tensor, None or 'separator', got %r" % (doc_start,))
            doc_start = tokens == SEP if c.vocab_size == SEP + 1 else None
        if K > 1 and not c.feedback:
            raise ValueError("K > 1 needs a feedback fuser")
        g = K if grad_passes <= 0 else min(grad_passes, K)
        first_grad = K - g
        plain, pos, mask = self.doc_layout(doc_start, T, c.doc_attention == "masked")
        e = self.model.embed_tokens(tokens)
        pe = self.model.feedback.shared(e) if K > 1 else None
        t_idx = torch.arange(T)
        losses, objective, prev, Hs = [], 0.0, None, []
        for j in range(K):
            with torch.set_grad_enabled(torch.is_grad_enabled() and j >= first_grad):
                if j == 0:
                    X = self.plain_input(e)
                else:
                    src = self.source(*prev)
                    if detach:
                        src = src.detach()
                    if noise is not None:
                        src = src + noise[j]
                    elif sigma > 0:
                        src = src + (torch.rand(src.shape, generator=generator) * (2 * sigma) - sigma)
                    S = F.pad(src[:, :-1], (0, 0, 1, 0))  # shift_right: S[:, t] = src[:, t-1], S[:, 0] = 0
                    if prefix is None:
                        p = torch.zeros(B, dtype=torch.long)
                    elif isinstance(prefix, str):
                        assert prefix == "uniform"
                        p = torch.randint(0, T, (B,), generator=generator)
                    elif isinstance(prefix, int):
                        p = torch.full((B,), prefix, dtype=torch.long)
                    else:
                        p = prefix[j]
                    fed = t_idx[None, :] >= torch.clamp(p, min=1)[:, None]
                    if plain is not None:
                        fed = fed & ~plain
                    X = self.fused_input(S, e, pe, fed)
                H, R = self.stack(X, pos, mask)
                loss = self.ce(H, targets)
            w = 1.0 if j == 0 else lam / (K - 1)
            losses.append(loss)
            objective = objective + w * loss if j >= first_grad else objective + w * loss.detach()
            prev = (H, R)
            if states:
                Hs.append(H)
        if states:
            return objective, losses, Hs
        return objective, losses


def load_checkpoint(path: str, config: Optional[Config] = None) -> FBT:
    """An FBT with the weights of an fbt checkpoint (a model.safetensors file or a checkpoint directory)."""
    import os
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    tensors, meta = read_safetensors(path)
    if config is None:
        if "config" not in meta:
            raise ValueError(f"{path}: no config in __metadata__")
        config = Config.from_dict(json.loads(meta["config"]))
    return FBT(config).load_tensors(tensors)


# ------------------------------------------------------------------------------------------ decoder


class KVCache:
    """An explicit, preallocated KV cache: per layer k, v (B, NKV, capacity, hs), one write position
    (all B sequences advance together), and h_prev (B, D), the state fed back in soft mode."""

    def __init__(self, m: FBT, B: int, capacity: int):
        c = m.cfg
        self.k = [torch.zeros(B, c.num_key_value_heads, capacity, c.hs) for _ in range(c.num_hidden_layers)]
        self.v = [torch.zeros(B, c.num_key_value_heads, capacity, c.hs) for _ in range(c.num_hidden_layers)]
        self.h = torch.zeros(B, c.hidden_size)
        self.has_h = False
        self.len = 0
        self.capacity = capacity


class Decoder:
    """KV-cached decoding in the modes of spec section 4: "standard", "soft", "fused(k)".

    The work is in two pure functions of tensors (_prefill_core, _step_core) that compile() hands to
    torch.compile; the bookkeeping (document starts, write position, h_prev) stays in Python.
    amp: None (fp32) or torch.bfloat16: both functions run under autocast(amp) (inside what is compiled);
    the cache, h_prev and the prefill's last logits stay fp32."""

    def __init__(self, m: FBT, sep_token: int = SEP, amp: Optional[torch.dtype] = None):
        self.m, self.sep, self.amp = m, sep_token, amp
        self._prefill, self._step = self._prefill_amp, self._step_amp

    def _prefill_amp(self, *args):
        with autocast(self.amp):
            return self._prefill_core(*args)

    def _step_amp(self, *args):
        with autocast(self.amp):
            return self._step_core(*args)

    def compile(self, **kw):
        """torch.compile the prefill and the step (the step's write position becomes a dynamic int
        after its first change, so it compiles twice per mode and capacity, then never again)."""
        import torch._dynamo
        torch._dynamo.config.cache_size_limit = max(64, torch._dynamo.config.cache_size_limit)
        self._prefill = torch.compile(self._prefill_amp, **kw)
        self._step = torch.compile(self._step_amp, **kw)
        return self

    @staticmethod
    def parse_mode(mode: str) -> Tuple[str, int]:
        if mode in ("standard", "soft"):
            return mode, 0
        if mode.startswith("fused"):
            n = mode[5:].strip("()")
            return "fused", int(n) if n else 1
        raise ValueError(f"unknown decoding mode {mode!r}")

    def _prefill_core(self, prompt, passes: int, plain, pos, mask):
        """passes over the prompt (1 plain + passes-1 fed back); returns (kv of the last pass, H, R)."""
        m = self.m
        B, P = prompt.shape
        e = m.model.embed_tokens(prompt)
        pe = m.model.feedback.shared(e) if passes > 1 else None
        prev, kv = None, []
        for j in range(passes):
            kv = []
            if j == 0:
                X = m.plain_input(e)
            else:
                S = F.pad(m.source(*prev)[:, :-1], (0, 0, 1, 0))
                fed = (torch.arange(P) >= 1)[None, :].expand(B, P)
                if plain is not None:
                    fed = fed & ~plain
                X = m.fused_input(S, e, pe, fed)
            prev = m.stack(X, pos, mask, kv_out=kv)
        return kv, prev[0], prev[1]

    @torch.inference_mode()
    def prefill(self, cache: KVCache, prompt: torch.Tensor, mode: str = "standard") -> torch.Tensor:
        """prompt (B, P): the mode's prefill (fused(k): a plain pass + k fed-back passes, position 0
        plain, no prefix mixing; commits the last pass's K/V and state). Returns the logits (B, V) of
        the last prompt position."""
        m, c = self.m, self.m.cfg
        kind, k = self.parse_mode(mode)
        B, P = prompt.shape
        assert cache.len == 0 and P <= cache.capacity
        ds = prompt == self.sep
        ds[:, 0] = True
        plain, pos, mask = m.doc_layout(ds, P, c.doc_attention == "masked")
        if plain is not None and B != 1:
            raise NotImplementedError("documents inside a batched prompt")
        kv, H, R = self._prefill(prompt, 1 + (k if kind == "fused" else 0), plain, pos, mask)
        start = 0
        if plain is not None and c.doc_attention == "masked":
            start = int(torch.nonzero(plain[0]).max())
        n = P - start
        for l, (kk, vv) in enumerate(kv):
            cache.k[l][:, :, :n] = kk[:, :, start:]
            cache.v[l][:, :, :n] = vv[:, :, start:]
        cache.len = n
        cache.h.copy_(m.source(H, R)[:, -1])
        cache.has_h = True
        return m.logits(H[:, -1])

    def _step_core(self, tokens, h, fused: bool, p: int, ks: List[torch.Tensor], vs: List[torch.Tensor]):
        """One new position per sequence at cache position p: writes K/V into ks, vs; returns (logits, state)."""
        m = self.m
        e = m.model.embed_tokens(tokens)[:, None]  # (B, 1, D)
        if fused:
            fb = m.model.feedback
            x = fb.in_norm(fb.fuse(h[:, None], e, fb.shared(e)))
        else:
            x = m.plain_input(e)
        cos, sin = m.rope_cos[p:p + 1], m.rope_sin[p:p + 1]
        for l, layer in enumerate(m.model.layers):
            at = layer.self_attn
            q, k, v = at.qkv(layer.input_layernorm(x), cos, sin)
            ks[l][:, :, p:p + 1] = k
            vs[l][:, :, p:p + 1] = v
            x = x + at.attend(q, ks[l][:, :, :p + 1], vs[l][:, :, :p + 1], False)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        H = m.model.norm(x)
        return m.logits(H[:, 0]), m.source(H, x)[:, 0]

    @torch.inference_mode()
    def step(self, cache: KVCache, tokens: torch.Tensor, mode: str = "standard") -> torch.Tensor:
        """Feeds tokens (B) (one new position per sequence); returns logits (B, V)."""
        m, c = self.m, self.m.cfg
        kind, _ = self.parse_mode(mode)
        doc_start = bool((tokens == self.sep).any())
        if doc_start:
            assert tokens.shape[0] == 1, "a document start inside a batched step"
            if c.doc_attention == "masked":
                cache.len = 0
        assert cache.len < cache.capacity, "cache full"
        fused = c.feedback and kind != "standard" and cache.has_h and not doc_start
        logits, h = self._step(tokens, cache.h, fused, cache.len, cache.k, cache.v)
        cache.h.copy_(h)
        cache.has_h = True
        cache.len += 1
        return logits

    @torch.inference_mode()
    def generate_greedy(self, prompt: List[int], mode: str, max_new_tokens: int) -> List[int]:
        """Greedy decoding of one request (ties to the lowest token id, as torch.argmax and fbt)."""
        cache = KVCache(self.m, 1, min(self.m.cfg.max_position_embeddings, len(prompt) + max_new_tokens))
        logits = self.prefill(cache, torch.tensor([prompt]), mode)
        out = [int(torch.argmax(logits[0]))]
        while len(out) < max_new_tokens:
            logits = self.step(cache, torch.tensor([out[-1]]), mode)
            out.append(int(torch.argmax(logits[0])))
        return out


# ------------------------------------------------------------------------------------ training step


def make_optimizer(m: FBT, lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1):
    """AdamW with decay on matrices only (fbt's rule), the fused CPU kernel when available."""
    decay = [p for p in m.parameters() if p.dim() >= 2]
    no_decay = [p for p in m.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=True)
