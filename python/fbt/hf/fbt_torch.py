"""fbt_torch: the PyTorch implementation of the fbt model, one file that serves three uses.

  * the Hugging Face model: `fbt export --hf DIR` (and `fbt.export_hf`) copies this file beside
    modeling_fbt.py, which wraps it as FbtForCausalLM (AutoModelForCausalLM with trust_remote_code=True);
  * the interop check (scripts/interop_check.py) and the benchmark peer (benchmarks/peer/bench_peer.py,
    check_peer.py), which import it from python/fbt/hf/;
  * anyone's PyTorch code: `from fbt.hf.fbt_torch import FBT, Decoder` (pip install .), or the file itself.

It is an independent implementation of docs/spec.md sections 1-4, 8-10, written as a researcher would write
it in current PyTorch (fp32 or fp64, CPU or CUDA): a Qwen3-style decoder (pre-norm RMSNorm, per-head QK-norm
before rotate-half RoPE with positions from 0, grouped-query attention through F.scaled_dot_product_attention,
SwiGLU, tied or untied head) whose stack takes layer-0 input vectors, with every knob of fbt's built-in
model types:
  block_norm       pre | sandwich (an RMSNorm on each attention and MLP output: attn_output_layernorm,
                   mlp_output_layernorm)
  per-layer sizes  layer_intermediate_size, layer_num_attention_heads, layer_num_key_value_heads
  sliding windows  layer_types (full_attention | sliding_attention) + sliding_window W: a sliding layer's
                   query sees its last W positions (itself included), as Hugging Face Qwen3
  doc_attention    masked (attention and RoPE positions restart at a document start) | causal
  fuser            none | glu | gated_add | concat (spec 2), fuser_options {"alpha", "init"}
  feedback_source  post_final_norm | pre_final_norm | layer (+ feedback_layer): the tapped state
  input_norm       all | fused_only | feedback_passes: which layer-0 inputs go through N_in
  gate_norm        separate | shared (the fuser's gate-side norm is N_in: the paper's one input norm)
the K-pass objective of spec section 3 (shift_right, per-row prefix, jitter, detach, grad_passes), and a
KV-cached decoder with an explicit, preallocated cache in the modes standard, soft and fused(k), each with
an optional prompt prefill "MODE/prefill=P" (P: standard, fused(k), recurrent, recurrent(k)), as fbt's.

It reads fbt checkpoints (safetensors with the model config as JSON under __metadata__["config"]) with a small
reader of its own (json + torch.frombuffer; no dependency on the `safetensors` package), so it can start from
exactly the weights fbt initialised ("same init"), and it writes them back (FBT.save), which fbt loads.

Mixed precision (bench_peer.py --precision bf16): `autocast(torch.bfloat16)` around the forward and the
loss, the stock `torch.autocast("cpu", dtype=torch.bfloat16)`: the products (nn.Linear / F.linear, the
head, scaled_dot_product_attention) run with bf16 operands, master weights, gradients and the optimizer
stay fp32. Two lines keep the rest fp32 as in fbt's bf16 mode (and as Hugging Face's Qwen3 does): the
RMSNorms upcast their input (`x.float()`; also keeps F.rms_norm on its fused kernel, which refuses a bf16
input with an fp32 weight) and the loss upcasts the logits. Both are no-ops in fp32.

Nothing in fbt's C++ library needs this file or torch. The file imports nothing of fbt's: it must work
alone in an exported directory.
"""
from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass, field, fields
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

SEP = 256  # fbt's byte tokenizer: bytes 0..255 + the document separator

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16}

FUSERS = ("none", "glu", "gated_add", "concat")


def autocast(dtype: Optional[torch.dtype]):
    """torch.autocast on the CPU with dtype (torch.bfloat16), or a disabled one for None (fp32): the same
    context in both precisions, so torch.compile traces the same code (autocast inside the compiled function)."""
    return torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None)

# ------------------------------------------------------------------------------------------- config


def _one_of(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"model config field {name}: {value!r} is not one of {', '.join(map(str, allowed))}")


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
    feedback_layer: int = -1
    input_norm: str = "all"
    gate_norm: str = "separate"
    in_norm_init: str = "one"
    block_norm: str = "pre"
    glu_init: str = "default"
    gated_add_alpha: float = 0.1
    sliding_window: int = 0
    layer_types: List[str] = field(default_factory=list)
    layer_intermediate_size: List[int] = field(default_factory=list)
    layer_num_attention_heads: List[int] = field(default_factory=list)
    layer_num_key_value_heads: List[int] = field(default_factory=list)

    @property
    def hs(self) -> int:
        return self.head_dim if self.head_dim > 0 else self.hidden_size // self.num_attention_heads

    @property
    def feedback(self) -> bool:
        return self.fuser != "none"

    def layer_heads(self, l: int) -> int:
        return self.layer_num_attention_heads[l] if self.layer_num_attention_heads else self.num_attention_heads

    def layer_kv_heads(self, l: int) -> int:
        return self.layer_num_key_value_heads[l] if self.layer_num_key_value_heads else self.num_key_value_heads

    def layer_intermediate(self, l: int) -> int:
        return self.layer_intermediate_size[l] if self.layer_intermediate_size else self.intermediate_size

    def layer_window(self, l: int) -> int:
        """W of layer l: sliding_window on a sliding_attention layer, else 0 (full causal attention)."""
        return self.sliding_window if self.layer_types and self.layer_types[l] == "sliding_attention" else 0

    @property
    def tap_layer(self) -> int:
        """-1: the final norm's output is fed back; else the block whose output is (0-based)."""
        if self.feedback_source == "post_final_norm":
            return -1
        if self.feedback_source == "pre_final_norm":
            return self.num_hidden_layers - 1
        return self.feedback_layer

    def validate(self) -> "Config":
        """Refuses (ValueError naming the field) what this implementation does not compute as fbt does."""
        _one_of("fuser", self.fuser, FUSERS)
        _one_of("feedback_source", self.feedback_source, ("post_final_norm", "pre_final_norm", "layer"))
        _one_of("input_norm", self.input_norm, ("all", "fused_only", "feedback_passes"))
        _one_of("gate_norm", self.gate_norm, ("separate", "shared"))
        _one_of("block_norm", self.block_norm, ("pre", "sandwich"))
        _one_of("doc_attention", self.doc_attention, ("masked", "causal"))
        _one_of("glu_init", self.glu_init, ("default", "fan_in", "identity_both"))
        L = self.num_hidden_layers
        if self.feedback_source == "layer" and not 0 <= self.feedback_layer < L:
            raise ValueError(f"model config field feedback_layer: {self.feedback_layer} is not a block index in [0, {L})")
        for name in ("layer_types", "layer_intermediate_size", "layer_num_attention_heads", "layer_num_key_value_heads"):
            v = getattr(self, name)
            if v and len(v) != L:
                raise ValueError(f"model config field {name}: {len(v)} entries for {L} layers")
        for t in self.layer_types:
            _one_of("layer_types", t, ("full_attention", "sliding_attention"))
        if any(t == "sliding_attention" for t in self.layer_types) and self.sliding_window <= 0:
            raise ValueError("model config field sliding_window: sliding_attention layers need a window >= 1")
        if self.hs % 2:
            raise ValueError(f"model config field head_dim: {self.hs} must be even (rotate-half RoPE)")
        return self

    @staticmethod
    def from_dict(d: dict) -> "Config":
        """From an fbt config (a checkpoint's metadata, fbt_config, a config.json written by fbt) or a Hugging
        Face Qwen3 config.json (model_type "qwen3": fuser none). Refuses a piece this file does not implement
        (a user's fuser or block) by name."""
        names = {f.name for f in fields(Config)}
        if d.get("block", "decoder") != "decoder" or any(b != "decoder" for b in d.get("layer_blocks") or []):
            raise ValueError(f"block {d.get('block')!r} / layer_blocks {d.get('layer_blocks')!r}: only fbt's built-in "
                             "decoder block has a PyTorch implementation (a user's block stays in fbt)")
        c = Config(**{k: v for k, v in d.items() if k in names and v is not None})
        if d.get("model_type") == "qwen3" and "fuser" not in d:
            c.fuser = "none"
        if c.fuser not in FUSERS:
            raise ValueError(f"fuser {c.fuser!r}: only fbt's built-in fusers ({', '.join(FUSERS)}) have a PyTorch "
                             "implementation (a user's fuser stays in fbt)")
        opts = d.get("fuser_options") or {}
        if "alpha" in opts:
            c.gated_add_alpha = float(opts["alpha"])
        if "init" in opts:
            c.glu_init = str(opts["init"])
        if d.get("head_dim") is None:
            c.head_dim = 0
        # Hugging Face's sliding-window keys, read as transformers' Qwen3Config reads them (fbt writes
        # use_sliding_window true with its windows; an fbt config without the key means it)
        # as fbt reads them (io/config_json.hpp): given layer_types have one entry per layer and a sliding layer
        # needs a window, whether or not the window is on; a window no layer uses is none (HF's rule) or refused
        use = bool(d.get("use_sliding_window", d.get("model_type") != "qwen3"))
        given_types = bool(c.layer_types)
        if given_types and len(c.layer_types) != c.num_hidden_layers:
            raise ValueError(f"model config field layer_types: {len(c.layer_types)} entries for {c.num_hidden_layers} layers")
        c.sliding_window = int(d.get("sliding_window") or 0) if use else 0
        if "sliding_attention" in c.layer_types and c.sliding_window <= 0:
            raise ValueError("model config field sliding_window: " + ("use_sliding_window is false" if not use else
                             f"sliding_window is {d.get('sliding_window')!r}") + " but layer_types gives sliding_attention layers")
        if c.sliding_window > 0 and not given_types:
            first = int(d.get("max_window_layers", 28))
            c.layer_types = ["sliding_attention" if l >= first else "full_attention" for l in range(c.num_hidden_layers)]
        if "sliding_attention" not in c.layer_types:
            if c.sliding_window > 0 and given_types and d.get("model_type") != "qwen3":
                raise ValueError(f"model config field sliding_window: is {c.sliding_window} but no layer is sliding_attention")
            c.sliding_window, c.layer_types = 0, []
        return c.validate()

    def to_dict(self) -> dict:
        """fbt's config JSON (what FBT.save writes into the checkpoint and fbt reads back)."""
        d = {f.name: getattr(self, f.name) for f in fields(Config)}
        d["head_dim"] = self.hs
        d["model_type"], d["hidden_act"], d["attention_bias"] = "fbt", "silu", False
        for k in ("glu_init", "gated_add_alpha"):
            d.pop(k)
        if self.fuser == "glu":
            d["fuser_options"] = {"init": self.glu_init}
        elif self.fuser == "gated_add":
            d["fuser_options"] = {"alpha": self.gated_add_alpha}
        for k in ("layer_types", "layer_intermediate_size", "layer_num_attention_heads", "layer_num_key_value_heads"):
            if not d[k]:
                d.pop(k)
        if self.sliding_window <= 0:
            d.pop("sliding_window")
            d.pop("layer_types", None)
        else:
            d["use_sliding_window"] = True
            types = self.layer_types or ["full_attention"] * self.num_hidden_layers
            d["layer_types"] = types
            d["max_window_layers"] = next((l for l, t in enumerate(types) if t == "sliding_attention"), self.num_hidden_layers)
        if self.feedback_source != "layer":
            d.pop("feedback_layer")
        for k, v in (("gate_norm", "separate"), ("in_norm_init", "one"), ("block_norm", "pre")):
            if d[k] == v:
                d.pop(k)
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


def rope_tables(max_pos: int, hs: int, theta: float, device=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (max_pos, hs): computed in double, rounded to fp32 (as fbt's RopeTable), halves repeated."""
    half = hs // 2
    i = torch.arange(half, dtype=torch.float64, device=device)
    f = theta ** (-2.0 * i / hs)
    a = torch.arange(max_pos, dtype=torch.float64, device=device)[:, None] * f[None, :]
    cos, sin = torch.cos(a).float(), torch.sin(a).float()
    return torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def apply_rope(x, cos, sin):
    """x (..., T, hs); cos, sin broadcastable to it."""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, c: Config, l: int):
        super().__init__()
        self.nh, self.nkv, self.hs = c.layer_heads(l), c.layer_kv_heads(l), c.hs
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
    def __init__(self, c: Config, l: int):
        super().__init__()
        D, Fh = c.hidden_size, c.layer_intermediate(l)
        self.gate_proj = nn.Linear(D, Fh, bias=False)
        self.up_proj = nn.Linear(D, Fh, bias=False)
        self.down_proj = nn.Linear(Fh, D, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    """pre:      mid = x + Attn(N1(x)),      out = mid + Mlp(N2(mid))
    sandwich: mid = x + Na(Attn(N1(x))),  out = mid + Nm(Mlp(N2(mid)))   (block_norm, spec 10)"""

    def __init__(self, c: Config, l: int):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c, l)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c, l)
        self.window = c.layer_window(l)
        self.sandwich = c.block_norm == "sandwich"
        if self.sandwich:
            self.attn_output_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
            self.mlp_output_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def after_attention(self, x, a):
        """x + the attention branch's output a; then the MLP branch."""
        x = x + (self.attn_output_layernorm(a) if self.sandwich else a)
        y = self.mlp(self.post_attention_layernorm(x))
        return x + (self.mlp_output_layernorm(y) if self.sandwich else y)

    def forward(self, x, cos, sin, mask=None, kv_out=None):
        return self.after_attention(x, self.self_attn(self.input_layernorm(x), cos, sin, mask, kv_out))

    def step(self, x, cos, sin, kc, vc, p: int):
        """One new position per sequence (x (B, 1, D)) at cache position p: writes its K/V into kc, vc
        (B, NKV, capacity, hs) and attends to the positions its window allows."""
        at = self.self_attn
        q, k, v = at.qkv(self.input_layernorm(x), cos, sin)
        kc[:, :, p:p + 1] = k
        vc[:, :, p:p + 1] = v
        lo = max(0, p + 1 - self.window) if self.window > 0 else 0
        return self.after_attention(x, at.attend(q, kc[:, :, lo:p + 1], vc[:, :, lo:p + 1], False))


class Feedback(nn.Module):
    """N_in and the fuser (spec section 2). Parameter names are the checkpoint's under model.feedback.
    With gate_norm "shared" the fuser's gate-side norm is N_in itself (no gate_norm.weight of its own)."""

    def __init__(self, c: Config):
        super().__init__()
        D, eps = c.hidden_size, c.rms_norm_eps
        self.kind, self.eps, self.alpha = c.fuser, eps, c.gated_add_alpha
        self.in_norm = RMSNorm(D, eps)
        self.shared_gate = c.gate_norm == "shared"
        if not self.shared_gate:
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

    def gate_normed(self, e):
        return self.in_norm(e) if self.shared_gate else self.gate_norm(e)

    def shared(self, e):
        """The e-only part of the fuser (the same in every pass of a step): computed once."""
        D, ng = self.D, self.gate_normed(e)
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
    """Holds the parameters under the Hugging Face Qwen3 names (model.*) and fbt's model.feedback.*."""

    def __init__(self, c: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Block(c, l) for l in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        if c.feedback:
            self.feedback = Feedback(c)


# -------------------------------------------------------------------------------------------- model


class Layout:
    """Where documents start in a (B, T) batch and what each layer may attend to:
    plain (B, T) bool or None (position 0 and document starts: never fed back), pos (B, 1, T) RoPE
    positions or None (0..T-1), and per window W a mask (B, 1, T, T) bool, or None for plain causal."""

    def __init__(self, doc_start: Optional[torch.Tensor], T: int, masked: bool, device=None):
        self.T, self.plain, self.pos, self.allowed = T, None, None, None
        self._masks: Dict[int, Optional[torch.Tensor]] = {}
        t = torch.arange(T, device=device)
        self._t = t
        if doc_start is not None and bool(doc_start[:, 1:].any()):
            ds = doc_start.clone()
            ds[:, 0] = True
            self.plain = ds
            if masked:
                start = torch.cummax(torch.where(ds, t, torch.zeros_like(t)), dim=1).values  # (B, T)
                self.pos = (t - start).unsqueeze(1)
                self.allowed = ((t[None, None, :] >= start[:, :, None]) & (t[None, None, :] <= t[None, :, None])).unsqueeze(1)

    def mask(self, window: int):
        if window not in self._masks:
            t = self._t
            if window <= 0:
                m = self.allowed
            else:
                near = (t[None, :] <= t[:, None]) & (t[:, None] - t[None, :] < window)  # (T, T)
                m = near[None, None] if self.allowed is None else (self.allowed & near)
            self._masks[window] = m
        return self._masks[window]


class FBTCore:
    """The model's computation on self.cfg (a Config), self.model (Inner) and self.lm_head (untied heads):
    a mixin, so that the plain module FBT below and the Hugging Face FbtForCausalLM (modeling_fbt.py) are
    one implementation. state_dict() names are fbt's checkpoint names."""

    def _build(self, c: Config) -> None:
        """Creates the modules of config c (call from an nn.Module's __init__ after its super().__init__)."""
        self.cfg = c.validate()
        self.model = Inner(c)
        if not c.tie_word_embeddings:
            self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self._rope: Dict[Tuple, Tuple[torch.Tensor, torch.Tensor]] = {}

    # ---- weights
    def spec_init(self, seed: int = 0):
        """Spec init (N(0, 0.02^2), o/down_proj std/sqrt(2L), norms 1, fuser inits), torch's own RNG.
        For "same init" as fbt, load fbt's initial checkpoint instead (load_checkpoint)."""
        c, g = self.cfg, torch.Generator().manual_seed(seed)
        std, out_std = c.initializer_range, c.initializer_range / math.sqrt(2 * c.num_hidden_layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                elif name.endswith(("o_proj.weight", "down_proj.weight")):
                    p.copy_(torch.randn(p.shape, generator=g) * out_std)
                elif name.startswith("model.feedback."):
                    continue
                else:
                    p.copy_(torch.randn(p.shape, generator=g) * std)
            if c.feedback:
                fb, D = self.model.feedback, c.hidden_size
                if c.in_norm_init == "embedding":
                    fb.in_norm.weight.fill_(c.initializer_range)
                eye = torch.eye(D)
                if c.fuser == "glu":
                    if c.glu_init == "fan_in":
                        fb.w_u.weight.copy_(torch.randn(D, D, generator=g) / math.sqrt(D))
                        fb.w_g.weight.copy_(torch.randn(D, D, generator=g) / math.sqrt(D))
                    else:
                        fb.w_u.weight.copy_(eye)
                        if c.glu_init == "identity_both":
                            fb.w_g.weight.copy_(eye)
                        else:
                            fb.w_g.weight.copy_(torch.randn(D, D, generator=g) * math.sqrt(1e-6 / D))
                elif c.fuser == "gated_add":
                    fb.w_g.weight.copy_(torch.randn(D, 2 * D, generator=g) * std)
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
        """An fbt model file (safetensors, F32, the config under __metadata__["config"]): fbt loads it."""
        sd = {k: v.float() for k, v in self.state_dict().items()}
        write_safetensors(path, sd, {"format": "pt", "config": json.dumps(self.cfg.to_dict())})

    # ---- pieces
    @property
    def head_weight(self):
        return self.model.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight

    def rope(self, device) -> Tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (max_position_embeddings, hs) on `device` (made once per device; not buffers, so that a
        model built on the meta device, as transformers builds it, still gets them)."""
        key = (str(device),)
        if key not in self._rope:
            c = self.cfg
            self._rope[key] = rope_tables(c.max_position_embeddings, c.hs, c.rope_theta, device)
        return self._rope[key]

    def plain_input(self, e):
        """Layer-0 input of a plain position of pass 1 or of a step without feedback: N_in(e) (input_norm
        all), else e."""
        if self.cfg.feedback and self.cfg.input_norm == "all":
            return self.model.feedback.in_norm(e)
        return e

    def fused_input(self, S, e, pe, fed):
        """A fed-back pass's layer-0 input: N_in(Fuse(S, e)) where fed (B, T) is true; the plain rows get
        N_in(e) (input_norm all, feedback_passes) or e (fused_only)."""
        fb = self.model.feedback
        u = fb.fuse(S, e, pe)
        m = fed.unsqueeze(-1)
        if self.cfg.input_norm != "fused_only":
            return fb.in_norm(torch.where(m, u, e))
        return torch.where(m, fb.in_norm(u), e)

    def stack(self, X, layout: Optional[Layout] = None, kv_out=None):
        """(H = FinalNorm(Stack(X)), the tapped state): the stack on layer-0 inputs X (B, T, D)."""
        T = X.shape[1]
        cos, sin = self.rope(X.device)
        if layout is None or layout.pos is None:
            cos, sin = cos[:T], sin[:T]
        else:
            cos, sin = cos[layout.pos], sin[layout.pos]
        x, tap, tl = X, None, self.cfg.tap_layer
        for l, layer in enumerate(self.model.layers):
            mask = None if layout is None else layout.mask(layer.window)
            if mask is None and layer.window > 0:
                mask = Layout(None, T, False, X.device).mask(layer.window)
            x = layer(x, cos, sin, mask, kv_out)
            if l == tl:
                tap = x
        H = self.model.norm(x)
        return H, (H if tl < 0 else tap)

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

    def doc_starts(self, tokens, doc_start="separator"):
        """doc_start as kpass takes it -> a (B, T) bool tensor or None."""
        if isinstance(doc_start, str):
            if doc_start != "separator":
                raise ValueError("doc_start: a (B, T) bool tensor, None or 'separator', got %r" % (doc_start,))
            return tokens == SEP if self.cfg.vocab_size == SEP + 1 else None
        return doc_start

    # ---- the K-pass objective (spec section 3)
    def kpass(self, tokens, targets, K=1, lam=1.0, sigma=0.0, prefix=None, detach=False, grad_passes=0,
              doc_start="separator", generator=None, states=False, noise=None):
        """The K-pass objective: (objective, [loss_1..loss_K]) (losses as 0-dim tensors).

        targets None: no loss (objective and losses are None; with states=True the pass outputs are still
        returned). prefix: None (no prefix mixing), "uniform" (p ~ U{0..T-1} per sequence per pass), an int,
        or a (K, B) tensor (row 0 unused). Position 0 and document starts are always plain. grad_passes g:
        passes 1..K-g run under no_grad. detach: stop-gradient on the carried state. sigma: jitter
        U(-sigma, sigma) per element, added to the carried state before shift_right; or pass noise,
        a list whose entry j (j >= 1) is pass j's jitter (B, T, D) drawn by the caller (torch.compile
        traces no RNG then). doc_start: (B, T) bool, None (one document per row), or "separator" (fbt's default,
        as fbt.Model.logits and `fbt logits`: with the byte vocabulary a separator token starts a document)."""
        c = self.cfg
        B, T = tokens.shape
        doc_start = self.doc_starts(tokens, doc_start)
        if K > 1 and not c.feedback:
            raise ValueError("K > 1 needs a feedback fuser")
        g = K if grad_passes <= 0 else min(grad_passes, K)
        first_grad = K - g
        layout = Layout(doc_start, T, c.doc_attention == "masked", tokens.device)
        e = self.model.embed_tokens(tokens)
        pe = self.model.feedback.shared(e) if K > 1 else None
        t_idx = torch.arange(T, device=tokens.device)
        losses, objective, prev, Hs = [], 0.0, None, []
        for j in range(K):
            with torch.set_grad_enabled(torch.is_grad_enabled() and j >= first_grad):
                if j == 0:
                    X = self.plain_input(e)
                else:
                    src = prev[1]
                    if detach:
                        src = src.detach()
                    if noise is not None:
                        src = src + noise[j]
                    elif sigma > 0:
                        src = src + (torch.rand(src.shape, generator=generator, device=src.device) * (2 * sigma) - sigma)
                    S = F.pad(src[:, :-1], (0, 0, 1, 0))  # shift_right: S[:, t] = src[:, t-1], S[:, 0] = 0
                    if prefix is None:
                        p = torch.zeros(B, dtype=torch.long, device=tokens.device)
                    elif isinstance(prefix, str):
                        assert prefix == "uniform"
                        p = torch.randint(0, T, (B,), generator=generator).to(tokens.device)
                    elif isinstance(prefix, int):
                        p = torch.full((B,), prefix, dtype=torch.long, device=tokens.device)
                    else:
                        p = prefix[j]
                    fed = t_idx[None, :] >= torch.clamp(p, min=1)[:, None]
                    if layout.plain is not None:
                        fed = fed & ~layout.plain
                    X = self.fused_input(S, e, pe, fed)
                prev = self.stack(X, layout)
                loss = self.ce(prev[0], targets) if targets is not None else None
            if loss is not None:
                w = 1.0 if j == 0 else lam / (K - 1)
                losses.append(loss)
                objective = objective + w * loss if j >= first_grad else objective + w * loss.detach()
            if states:
                Hs.append(prev[0])
        if targets is None:
            objective, losses = None, None
        if states:
            return objective, losses, Hs
        return objective, losses


class FBT(FBTCore, nn.Module):
    """The full-bandwidth transformer as a plain torch module (the benchmark peer's and the interop check's)."""

    def __init__(self, c: Config):
        nn.Module.__init__(self)
        self._build(c)
        self.rope(self.model.embed_tokens.weight.device)  # made now, not inside a function torch.compile traces

    def init_weights(self, seed: int = 0):
        """The spec's init (FBTCore.spec_init)."""
        return self.spec_init(seed)


def load_checkpoint(path: str, config: Optional[Config] = None) -> FBT:
    """An FBT with the weights of an fbt checkpoint (a model.safetensors file or a checkpoint directory)."""
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
    """An explicit, preallocated KV cache: per layer k, v (B, NKV_l, capacity, hs), one write position
    (all B sequences advance together), and h (B, D), the tapped state fed back at the next step."""

    def __init__(self, m: FBTCore, B: int, capacity: int, dtype=None, device=None):
        c = m.cfg
        dtype = dtype or m.model.embed_tokens.weight.dtype
        device = device if device is not None else m.model.embed_tokens.weight.device
        if str(device) == "meta":
            device = None
        self.k = [torch.zeros(B, c.layer_kv_heads(l), capacity, c.hs, dtype=dtype, device=device) for l in range(c.num_hidden_layers)]
        self.v = [torch.zeros(B, c.layer_kv_heads(l), capacity, c.hs, dtype=dtype, device=device) for l in range(c.num_hidden_layers)]
        self.h = torch.zeros(B, c.hidden_size, dtype=dtype, device=device)
        self.has_h = False
        self.len = 0
        self.capacity = capacity


def parse_mode(mode: str) -> Tuple[str, int, str, int]:
    """"standard" | "soft" | "fused(k)" ("fusedK", "fused" = fused(1)), optionally "/prefill=P" with P one of
    standard, fused(k), recurrent, recurrent(k): (kind, k, prefill kind, prefill k). prefill kind "policy":
    the mode's own prefill (standard and soft: one plain pass; fused(k): a plain pass and k fed-back passes)."""
    base, _, pre = mode.partition("/prefill=")
    if "/" in base or (_ and not pre):
        raise ValueError(f"decoding mode {mode!r}: expected MODE or MODE/prefill=P")

    def fused_k(s: str, what: str) -> int:
        n = s[5:].strip()
        if n.startswith("(") and n.endswith(")"):
            n = n[1:-1]
        if n == "":
            return 1
        if not n.isdigit() or not 1 <= int(n) <= 1000:
            raise ValueError(f"{what} {s!r}: k must be an integer in [1, 1000]")
        return int(n)

    if base in ("standard", "soft"):
        kind, k = base, 0
    elif base.startswith("fused"):
        kind, k = "fused", fused_k(base, "decoding mode")
    else:
        raise ValueError(f"unknown decoding mode {base!r} (expected standard, soft or fused(k), optionally /prefill=P)")
    if not pre or pre == "policy":
        return kind, k, "policy", 0
    if pre == "standard":
        return kind, k, "standard", 0
    if pre == "recurrent":
        return kind, k, "recurrent", 0
    if pre.startswith("recurrent(") and pre.endswith(")"):
        n = pre[10:-1]
        if not n.isdigit() or not 1 <= int(n) <= 1000000:
            raise ValueError(f"prefill {pre!r}: k must be an integer in [1, 1000000]")
        return kind, k, "recurrent", int(n)
    if pre.startswith("fused"):
        return kind, k, "fused", fused_k(pre, "prefill")
    raise ValueError(f"prefill {pre!r}: expected standard, fused(k), recurrent or recurrent(k)")


class Decoder:
    """KV-cached decoding in the modes of spec section 4: "standard", "soft", "fused(k)", each with an
    optional prefill "MODE/prefill=P" (fbt's decode/policy.hpp).

    The work is in two pure functions of tensors (_prefill_core, _step_core) that compile() hands to
    torch.compile; the bookkeeping (document starts, write position, h) stays in Python.
    amp: None (fp32) or torch.bfloat16: both functions run under autocast(amp) (inside what is compiled);
    the cache, h and the prefill's last logits stay fp32."""

    def __init__(self, m: FBTCore, sep_token: Optional[int] = None, amp: Optional[torch.dtype] = None):
        if sep_token is None:
            sep_token = SEP if m.cfg.vocab_size == SEP + 1 else -1
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
        kind, k, _, _ = parse_mode(mode)
        return kind, k

    def _prefill_core(self, prompt, passes: int, layout: Layout):
        """passes over the prompt (1 plain + passes-1 fed back); returns (kv of the last pass, H, tapped state)."""
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
                S = F.pad(prev[1][:, :-1], (0, 0, 1, 0))
                fed = (torch.arange(P, device=prompt.device) >= 1)[None, :].expand(B, P)
                if layout.plain is not None:
                    fed = fed & ~layout.plain
                X = m.fused_input(S, e, pe, fed)
            H, tap = m.stack(X, layout, kv_out=kv)
            prev = (H, tap)
        return kv, prev[0], prev[1]

    @torch.inference_mode()
    def prefill(self, cache: KVCache, prompt: torch.Tensor, mode: str = "standard") -> torch.Tensor:
        """prompt (B, P): the mode's prefill (fused(k): a plain pass + k fed-back passes, position 0
        plain, no prefix mixing; recurrent: the first token plain, then each prompt token a fed-back step;
        commits the last pass's K/V and state). Returns the logits (B, V) of the last prompt position."""
        m, c = self.m, self.m.cfg
        kind, k, pre, pk = parse_mode(mode)
        if (kind != "standard" or pre in ("fused", "recurrent")) and not c.feedback:
            raise ValueError(f"decoding mode {mode!r} feeds the state back, but the model has no feedback fuser")
        B, P = prompt.shape
        assert cache.len == 0 and P <= cache.capacity and P >= 1
        steps = 0
        if pre == "recurrent":
            steps = P - 1 if pk == 0 else min(pk, P - 1)
        head = prompt[:, :P - steps]
        passes = 1 + (k if (pre == "policy" and kind == "fused") else pk if pre == "fused" else 0)
        Ph = head.shape[1]
        ds = head == self.sep
        ds[:, 0] = True
        layout = Layout(ds, Ph, c.doc_attention == "masked", prompt.device)
        if layout.plain is not None and B != 1:
            raise NotImplementedError("documents inside a batched prompt")
        kv, H, tap = self._prefill(head, passes, layout)
        start = 0
        if layout.plain is not None and c.doc_attention == "masked":
            start = int(torch.nonzero(layout.plain[0]).max())
        n = Ph - start
        for l, (kk, vv) in enumerate(kv):
            cache.k[l][:, :, :n] = kk[:, :, start:]
            cache.v[l][:, :, :n] = vv[:, :, start:]
        cache.len = n
        cache.h.copy_(tap[:, -1])
        cache.has_h = True
        logits = m.logits(H[:, -1])
        for i in range(P - steps, P):  # the recurrent part: fed-back steps (a document start stays plain)
            logits = self.step(cache, prompt[:, i], "soft")
        return logits

    def _step_core(self, tokens, h, fused: bool, p: int, ks: List[torch.Tensor], vs: List[torch.Tensor]):
        """One new position per sequence at cache position p: writes K/V into ks, vs; returns (logits, state)."""
        m = self.m
        e = m.model.embed_tokens(tokens)[:, None]  # (B, 1, D)
        if fused:
            fb = m.model.feedback
            x = fb.in_norm(fb.fuse(h[:, None].to(e.dtype), e, fb.shared(e)))
        else:
            x = m.plain_input(e)
        cos, sin = m.rope(x.device)
        cos, sin = cos[p:p + 1], sin[p:p + 1]
        tap, tl = None, m.cfg.tap_layer
        for l, layer in enumerate(m.model.layers):
            x = layer.step(x, cos, sin, ks[l], vs[l], p)
            if l == tl:
                tap = x
        H = m.model.norm(x)
        return m.logits(H[:, 0]), (H if tl < 0 else tap)[:, 0]

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
        if cache.len >= cache.capacity:
            raise ValueError(f"the KV cache is full ({cache.capacity} positions)")
        if cache.len >= c.max_position_embeddings:
            raise ValueError(f"position {cache.len} is past max_position_embeddings ({c.max_position_embeddings})")
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
        dev = self.m.model.embed_tokens.weight.device
        logits = self.prefill(cache, torch.tensor([prompt], device=dev), mode)
        out = [int(torch.argmax(logits[0]))]
        while len(out) < max_new_tokens:
            logits = self.step(cache, torch.tensor([out[-1]], device=dev), mode)
            out.append(int(torch.argmax(logits[0])))
        return out


# ------------------------------------------------------------------------------------ training step


def make_optimizer(m: nn.Module, lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1):
    """AdamW with decay on matrices only (fbt's rule), the fused CPU kernel when available."""
    decay = [p for p in m.parameters() if p.dim() >= 2]
    no_decay = [p for p in m.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=True)
