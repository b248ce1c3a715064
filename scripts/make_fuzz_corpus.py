#!/usr/bin/env python3
"""Writes the seed corpora of fbt's fuzz harnesses (tests/fuzz/, docs/fuzzing.md).

    scripts/make_fuzz_corpus.py OUT_DIR [HARNESS ...]

makes OUT_DIR/<harness>/ for each harness (default: all of them):

  safetensors   tiny fbt checkpoints (fuser none = a plain Qwen3 state dict, glu, gated_add, concat;
                F32, and F64/BF16/F16 variants), training states (the resume path), malformed files
  config_json   model config.json files: fbt's own, a Hugging Face Qwen3 one, a heterogeneous stack,
                and malformed ones
  train_config  training config files (fbt train --config): every field as a string (as a training
                state records them), hand-written ones with numbers, booleans and lists, the repository's
                examples/configs/*.json, malformed ones
  npy           .npy v1.0 and v2.0 files of <f4 and <f8 (C and Fortran order, 0-d, empty), malformed ones

Files named bad_* are malformed and must be refused. Files named hostile_* are inputs of the classes
that crashed, hung, allocated without bound or did not survive a round trip in an earlier hardening round
(deep nesting, a config that asks for 10^6 layers, a 4 GiB npy header, a seed of 2^64-1, ...), kept
as regression seeds: every ctest fuzz.<name> run replays them first.

Python 3 standard library only (struct, json): the files are written from the formats' specifications,
nothing is downloaded (the example config files are read from this repository). Deterministic: the
same files on every run.
"""
import json
import os
import struct
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------------------------------
# A deterministic stream of small floats (no random module: its algorithm may change between versions).


class Lcg:
    def __init__(self, seed):
        self.s = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return (self.s >> 11) / float(1 << 53)  # [0, 1)

    def normal_ish(self, scale):
        return scale * (self.next() + self.next() + self.next() - 1.5)


# ---------------------------------------------------------------------------------------------------
# safetensors: 8-byte little-endian header length, compact JSON header padded with spaces to a
# multiple of 8, then the tensors' bytes in order (huggingface/safetensors).


def pack(dtype, values):
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F64":
        return struct.pack("<%dd" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    if dtype == "BF16":  # the top half of an IEEE float (truncated)
        return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in values)
    raise ValueError(dtype)


DTYPE_SIZE = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I32": 4, "U8": 1}


def safetensors_bytes(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] laid out in this order."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    off = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# ---------------------------------------------------------------------------------------------------
# fbt checkpoints: the config a checkpoint carries (io/config_json.hpp to_json) and its tensors in
# checkpoint order (model/model.hpp assemble: embedding, layers, final norm, head, feedback).


def model_config(fuser, vocab=16, hidden=8, layers=1, heads=2, kv=1, inter=8, max_pos=32, tied=True,
                 source="post_final_norm", input_norm="all", qk_norm=True):
    c = {
        "vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv, "head_dim": hidden // heads, "intermediate_size": inter,
        "max_position_embeddings": max_pos, "rope_theta": 10000.0, "rms_norm_eps": 1e-06,
        "tie_word_embeddings": tied, "qk_norm": qk_norm, "initializer_range": 0.02, "z_loss": 0.0,
        "doc_attention": "masked", "fuser": fuser, "feedback_source": source, "input_norm": input_norm,
        "glu_init": "default", "gated_add_alpha": 0.1, "model_type": "fbt", "hidden_act": "silu",
        "attention_bias": False,
    }
    if fuser == "none" and qk_norm:
        c["architectures"] = ["Qwen3ForCausalLM"]
    return c


def model_specs(c):
    """[(name, shape)] of every parameter of the model `c` describes, in checkpoint order."""
    V, D, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    H, KV, hd, F = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["intermediate_size"]
    s = [("model.embed_tokens.weight", [V, D])]
    for l in range(L):
        p = "model.layers.%d." % l
        s += [(p + "input_layernorm.weight", [D]),
              (p + "self_attn.q_proj.weight", [H * hd, D]), (p + "self_attn.k_proj.weight", [KV * hd, D]),
              (p + "self_attn.v_proj.weight", [KV * hd, D]), (p + "self_attn.o_proj.weight", [D, H * hd])]
        if c["qk_norm"]:
            s += [(p + "self_attn.q_norm.weight", [hd]), (p + "self_attn.k_norm.weight", [hd])]
        s += [(p + "post_attention_layernorm.weight", [D]), (p + "mlp.gate_proj.weight", [F, D]),
              (p + "mlp.up_proj.weight", [F, D]), (p + "mlp.down_proj.weight", [D, F])]
    s.append(("model.norm.weight", [D]))
    if not c["tie_word_embeddings"]:
        s.append(("lm_head.weight", [V, D]))
    fb = "model.feedback."
    if c["fuser"] != "none":
        s.append((fb + "in_norm.weight", [D]))
    if c["fuser"] == "glu":
        s += [(fb + "w_u.weight", [D, D]), (fb + "w_g.weight", [D, D]), (fb + "gate_norm.weight", [D])]
    elif c["fuser"] == "gated_add":
        s += [(fb + "w_g.weight", [D, 2 * D]), (fb + "w_g.bias", [D]), (fb + "w_s.weight", [D, D]),
              (fb + "gate_norm.weight", [D]), (fb + "state_norm.weight", [D])]
    elif c["fuser"] == "concat":
        s += [(fb + "w_c.weight", [D, 2 * D]), (fb + "gate_norm.weight", [D]), (fb + "state_norm.weight", [D])]
    return s


def param_values(specs, seed):
    rng = Lcg(seed)
    out = []
    for name, shape in specs:
        n = numel(shape)
        if len(shape) == 1:  # gains near 1
            out.append([1.0 + rng.normal_ish(0.2) for _ in range(n)])
        else:
            out.append([rng.normal_ish(0.3) for _ in range(n)])
    return out


def checkpoint(c, seed, dtype="F32", metadata_extra=None):
    specs = model_specs(c)
    vals = param_values(specs, seed)
    meta = {"format": "pt", "config": json.dumps(c, sort_keys=True, separators=(",", ":"))}
    meta.update(metadata_extra or {})
    return safetensors_bytes([(n, dtype, s, pack(dtype, v)) for (n, s), v in zip(specs, vals)], meta)


def mt19937_state(seed):
    """std::mt19937's state as fbt::Rng::state() writes it: 624 words, the index, then the normal's spare."""
    x = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        x.append((1812433253 * (x[-1] ^ (x[-1] >> 30)) + i) & 0xFFFFFFFF)
    return " ".join(str(v) for v in x) + " 624 0 0"


def train_config_record(model_fields):
    """A training state's train_config (train/train_config.hpp to_json: every field as a string)."""
    r = {
        "K_max": "3", "adam_eps": "1e-08", "batch_size": "2", "beta1": "0.9", "beta2": "0.95", "checkpoint_every": "0",
        "data": "task:addition", "detach": "false", "doc_attention": "masked", "doc_split": "blank_line",
        "eval_every": "0", "eval_windows": "1", "feedback_source": "post_final_norm", "feedback_start": "0.25",
        "fuser": "glu", "gated_add_alpha": "0.1", "glu_init": "default", "grad_accum": "1", "grad_clip": "1",
        "grad_passes": "0", "head_dim": "0", "hidden_size": "8", "initializer_range": "0.02", "input_norm": "all",
        "intermediate_size": "8", "lambda": "1", "lambda_ramp": "0", "lr": "0.003", "lr_schedule": "cosine",
        "max_position_embeddings": "32", "min_lr": "0.0003", "monitor_passes": "0", "num_attention_heads": "2",
        "num_hidden_layers": "1", "num_key_value_heads": "1", "out_dir": "run", "p_answer": "0.33333333333333331",
        "p_compressed": "0.33333333333333331", "p_full": "0.33333333333333331", "pass_mix": "2:0.88,3:0.12",
        "prefix": "uniform", "progress": "false", "qk_norm": "true", "rms_norm_eps": "1e-06", "rope_theta": "10000",
        "seed": "1", "seq_eval_windows": "0", "seq_len": "16", "sigma": "0.02", "steps": "2", "task_difficulty": "2",
        "threads": "1", "tie_word_embeddings": "true", "val_fraction": "0.1", "vocab_size": "257",
        "warmup_steps": "50", "weight_decay": "0.1", "wsd_decay_frac": "0.2", "z_loss": "0",
    }
    r.update(model_fields)
    return r


def train_state(fuser="glu"):
    # The resume path builds the model from the record (vocab_size is the byte tokenizer's 257).
    c = model_config(fuser, vocab=257)
    rec = train_config_record({"fuser": fuser})
    specs = model_specs(c)
    rng = Lcg(7)
    tensors = []
    for pre in ("adam_m.", "adam_v."):
        for name, shape in specs:
            n = numel(shape)
            vals = [rng.normal_ish(1e-3) for _ in range(n)] if pre == "adam_m." else [abs(rng.normal_ish(1e-6)) for _ in range(n)]
            tensors.append((pre + name, "F32", shape, pack("F32", vals)))
    meta = {"format": "fbt-train-state", "step": "2", "trainer_step": "2", "tokens": "64", "compute_tokens": "128",
            "data_rng": mt19937_state(5489), "sched_rng": mt19937_state(42),
            "train_config": json.dumps(rec, sort_keys=True, separators=(",", ":"))}
    return safetensors_bytes(tensors, meta)


def safetensors_seeds():
    s = {}
    none = model_config("none")
    s["ckpt_none_qwen3"] = checkpoint(none, 1)
    s["ckpt_glu"] = checkpoint(model_config("glu"), 2)
    s["ckpt_gated_add_untied"] = checkpoint(model_config("gated_add", tied=False, input_norm="fused_only"), 3)
    s["ckpt_concat_pre_final_norm"] = checkpoint(model_config("concat", source="pre_final_norm"), 4)
    s["ckpt_glu_2layers_f64"] = checkpoint(model_config("glu", layers=2), 5, dtype="F64")
    s["ckpt_none_bf16"] = checkpoint(none, 6, dtype="BF16")
    s["ckpt_glu_f16"] = checkpoint(model_config("glu"), 7, dtype="F16")
    s["ckpt_none_no_qk_norm"] = checkpoint(model_config("none", qk_norm=False), 8)
    # a tied model whose file also carries lm_head.weight (Hugging Face writes it sometimes): an exact copy
    specs = model_specs(none)
    vals = param_values(specs, 1)
    t = [(n, "F32", sh, pack("F32", v)) for (n, sh), v in zip(specs, vals)]
    t.append(("lm_head.weight", "F32", specs[0][1], pack("F32", vals[0])))
    s["ckpt_none_tied_with_head"] = safetensors_bytes(t, {"format": "pt", "config": json.dumps(none, sort_keys=True)})
    s["train_state_glu"] = train_state("glu")
    s["train_state_none"] = train_state("none")
    # plain safetensors files (no fbt metadata) and malformed ones
    s["plain_two_tensors"] = safetensors_bytes([("a", "F32", [2], pack("F32", [1.0, 2.0])), ("b", "I32", [1], b"\x01\0\0\0")])
    s["plain_empty_header"] = safetensors_bytes([])
    s["plain_zero_size_tensor"] = safetensors_bytes([("z", "F32", [0, 3], b"")], {"k": "v"})
    s["bad_header_len_huge"] = struct.pack("<Q", 1 << 40) + b"{}      "
    s["bad_truncated"] = checkpoint(none, 1)[:-5]
    s["bad_not_json"] = struct.pack("<Q", 8) + b"{not js}"
    s["bad_nested"] = (lambda h: struct.pack("<Q", len(h)) + h)(b'{"__metadata__":{"a":' + b"[" * 64 + b"]" * 64 + b"}}")
    s["bad_duplicate_key"] = (lambda h: struct.pack("<Q", len(h)) + h)(
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}    ') + b"\0\0\0\0"
    s["bad_offsets_overlap"] = (lambda h: struct.pack("<Q", len(h)) + h)(
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}') + b"\0\0\0\0"
    c_big = dict(none, num_hidden_layers=3, vocab_size=20)  # the config disagrees with the tensors
    s["bad_config_mismatch"] = safetensors_bytes(
        [(n, "F32", sh, pack("F32", v)) for (n, sh), v in zip(specs, vals)], {"format": "pt", "config": json.dumps(c_big)})
    # hostile files of those classes (regression seeds; each was a crash, hang or huge allocation):
    # a header-only file whose config asks for 10^6 layers or a 2^31-1 vocabulary, and JSON nested
    # deeper than the stack allows a recursive dump() (50000 levels, 100 KB)
    for name, field, value in (("hostile_config_layers_1e6", "num_hidden_layers", 1000000),
                               ("hostile_config_vocab_2e9", "vocab_size", 2147483647)):
        c = dict(model_config("glu"), **{field: value})
        h = json.dumps({"__metadata__": {"format": "pt", "config": json.dumps(c, sort_keys=True)}}, separators=(",", ":")).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        s[name] = struct.pack("<Q", len(h)) + h
    h = b'{"__metadata__":{"a":' + b"[" * 50000 + b"]" * 50000 + b"}}"
    h += b" " * ((8 - len(h) % 8) % 8)
    s["hostile_deep_nesting"] = struct.pack("<Q", len(h)) + h
    return s


# ---------------------------------------------------------------------------------------------------
# config.json (io/config_json.hpp config_from_json_file)


def qwen3_hf_config():
    # the shape of Qwen/Qwen3-0.6B's config.json (written from the format, not downloaded)
    return {
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
        "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
        "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
        "use_sliding_window": False, "vocab_size": 151936,
    }


def config_json_seeds():
    s = {}
    s["fbt_glu"] = json.dumps(model_config("glu", vocab=257, hidden=16, layers=2, heads=4, kv=2, inter=24, max_pos=64), indent=2, sort_keys=True)
    s["fbt_none_qwen3"] = json.dumps(model_config("none"), indent=2, sort_keys=True)
    s["hf_qwen3_0_6b"] = json.dumps(qwen3_hf_config(), indent=2)
    hf = qwen3_hf_config()
    hf["head_dim"] = None
    hf["layer_types"] = ["full_attention"] * 28
    s["hf_qwen3_head_dim_null"] = json.dumps(hf)
    het = model_config("gated_add", layers=3, source="layer")
    het.update({"feedback_layer": 1, "layer_intermediate_size": [8, 4, 8], "layer_num_attention_heads": [2, 2, 2],
                "layer_num_key_value_heads": [1, 2, 1], "glu_init": "fan_in", "doc_attention": "causal", "z_loss": 1e-4})
    s["fbt_heterogeneous_layer_tap"] = json.dumps(het, sort_keys=True)
    s["fbt_minimal"] = '{"fuser": "concat", "hidden_size": 8, "num_attention_heads": 2}'
    s["bad_duplicate_key"] = '{"hidden_size": 8, "hidden_size": 16}'
    s["bad_unknown_key"] = '{"hidden_size": 8, "rope_type": "yarn"}'
    s["bad_wrong_types"] = '{"hidden_size": "8", "qk_norm": 1, "rope_theta": true, "layer_intermediate_size": [1.5]}'
    s["bad_huge_int"] = '{"vocab_size": 99999999999999999999, "num_hidden_layers": -1e300}'
    s["bad_nested"] = '{"fuser": ' + "[" * 64 + "]" * 64 + "}"
    s["bad_not_object"] = "[1, 2, 3]"
    s["bad_truncated"] = s["fbt_glu"][: len(s["fbt_glu"]) // 2]
    s["bad_rope_scaling"] = json.dumps(dict(qwen3_hf_config(), rope_scaling={"type": "yarn", "factor": 4.0}))
    # hostile: nesting deeper than a recursive dump() survives (50000 levels, 100 KB)
    s["hostile_deep_nesting"] = '{"fuser": ' + "[" * 50000 + "]" * 50000 + "}"
    return {k: v.encode() for k, v in s.items()}


# ---------------------------------------------------------------------------------------------------
# training config files (train/train_config.hpp load_train_config_file; read_train_config's record)


def train_config_seeds():
    s = {}
    s["record_all_strings"] = json.dumps(train_config_record({}), sort_keys=True, separators=(",", ":"))
    s["handwritten"] = json.dumps({
        "data": "task:multihop", "task_difficulty": 2, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "fuser": "glu",
        "pass_mix": "2:0.88,3:0.12", "K_max": 3, "feedback_start": 0.25, "lambda": 1.0, "steps": 100,
        "lr": 3e-3, "lr_schedule": "wsd", "wsd_decay_frac": 0.2, "batch_size": 8, "seq_len": 64,
        "detach": False, "progress": False, "seed": 7, "layer_intermediate_size": [128, 64], "out_dir": "runs/x",
    }, indent=2)
    s["baseline"] = json.dumps({"fuser": "none", "feedback_start": 1, "pass_mix": "1:1", "qk_norm": True,
                                "tie_word_embeddings": False, "z_loss": 1e-4, "doc_attention": "causal"})
    s["text_data"] = json.dumps({"data": "corpus.txt", "doc_split": "none", "val_fraction": 0.05, "grad_accum": 4,
                                 "threads": 2, "grad_clip": 0, "prefix": "3", "sigma": 0, "grad_passes": 1})
    s["bad_duplicate_key"] = '{"steps": 10, "steps": 20}'
    s["bad_unknown_field"] = '{"hidden_sise": 64}'
    s["bad_types"] = '{"steps": [1, "x"], "detach": {"a": 1}, "lr": null}'
    s["bad_numbers"] = '{"hidden_size": 4294967312, "steps": 99999999999999999999, "rope_theta": 1e400, "pass_mix": "2:0.5junk"}'
    s["bad_nested"] = '{"out_dir": ' + "[" * 64 + "]" * 64 + "}"
    s["bad_not_object"] = '"steps"'
    # hostile: values whose record (the text resume re-reads) is another value: a seed over LONG_MAX
    # (strtol clamps it) and pass_mix probabilities (written with 6 significant digits)
    s["hostile_seed_u64_max"] = '{"seed": 18446744073709551615}'
    s["hostile_pass_mix_precision"] = '{"pass_mix": "2:0.123456789,3:0.876543211"}'
    seeds = {k: v.encode() for k, v in s.items()}
    # the example config files of the repository (fbt train --config examples/configs/...)
    cfg_dir = os.path.join(REPO, "examples", "configs")
    if os.path.isdir(cfg_dir):
        for name in sorted(os.listdir(cfg_dir)):
            if name.endswith(".json"):
                with open(os.path.join(cfg_dir, name), "rb") as fh:
                    seeds["example_" + name[:-5]] = fh.read()
    return seeds


# ---------------------------------------------------------------------------------------------------
# .npy (io/npy.hpp load_npy): magic, version, little-endian header length (2 bytes in v1.0, 4 in
# v2.0), an ASCII dict padded with spaces and ending in '\n' so the data starts 64-byte aligned.


def npy_bytes(descr, shape, raw, fortran=False, version=1, dict_text=None):
    if dict_text is None:
        tup = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
        dict_text = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", tup)
    pre = 10 if version == 1 else 12
    d = dict_text + " " * (63 - (pre + len(dict_text)) % 64) + "\n"
    n = struct.pack("<H", len(d)) if version == 1 else struct.pack("<I", len(d))
    return b"\x93NUMPY" + bytes([version, 0]) + n + d.encode("latin-1") + raw


def npy_seeds():
    rng = Lcg(11)
    f = lambda n: [rng.normal_ish(1.0) for _ in range(n)]
    s = {}
    s["v1_f4_2x3"] = npy_bytes("<f4", (2, 3), pack("F32", f(6)))
    s["v1_f8_5"] = npy_bytes("<f8", (5,), pack("F64", f(5)))
    s["v1_f4_fortran_3x2"] = npy_bytes("<f4", (3, 2), pack("F32", f(6)), fortran=True)
    s["v1_f8_0d"] = npy_bytes("<f8", (), pack("F64", f(1)))
    s["v1_f4_empty_0x3"] = npy_bytes("<f4", (0, 3), b"")
    s["v2_f4_2x2x2"] = npy_bytes("<f4", (2, 2, 2), pack("F32", f(8)), version=2)
    s["v2_f8_fortran_2x3"] = npy_bytes("<f8", (2, 3), pack("F64", f(6)), fortran=True, version=2)
    # a header longer than 128 bytes (a length whose low byte is >= 0x80: xtensor mis-decodes it)
    s["v1_f4_long_header"] = npy_bytes("<f4", (4,), pack("F32", f(4)),
                                       dict_text="{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }" + " " * 150)
    s["bad_big_endian"] = npy_bytes(">f4", (2,), struct.pack(">2f", 1.0, 2.0))
    s["bad_int32"] = npy_bytes("<i4", (2,), struct.pack("<2i", 1, 2))
    s["bad_truncated"] = npy_bytes("<f8", (4,), pack("F64", f(3)))
    s["bad_version3"] = b"\x93NUMPY\x03\x00" + s["v1_f8_5"][8:]
    s["hostile_huge_shape"] = npy_bytes("<f4", (0, 1 << 62, 1 << 62), b"")
    s["hostile_header_len_4g"] = b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{"
    s["bad_shape_text"] = npy_bytes("<f4", (), b"", dict_text="{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }")
    return s


def sft_jsonl_seeds():
    """SFT lines (io/sft_jsonl.hpp): text and token-id files, and the refusals of issue 47."""
    s = {}
    s["text"] = b'{"prompt": "What is 2+3?\\n", "response": "#### 5\\n"}\n{"prompt": "", "response": "ok"}\n\n{"prompt": "a", "response": "b"}\n'
    s["ids"] = b'{"prompt": [1, 2, 3], "response": [4, 5]}\n{"prompt": [], "response": [299]}\n{"prompt": [7], "response": [8]}\n'
    s["long_prompts"] = b"".join(b'{"prompt": "' + b"x" * 40 + b'?", "response": "ok"}\n' for _ in range(4))
    s["bad_mixed"] = b'{"prompt": "a", "response": "b"}\n{"prompt": [1], "response": [2]}\n'
    s["bad_duplicate_key"] = b'{"prompt": "a", "response": "b", "response": "c"}\n'
    s["bad_nul"] = b'{"prompt": "a", "response": "b"}\x00{"x": 1}\n'
    s["bad_trailing"] = b'{"prompt": "a", "response": "b"} {"prompt": "c"}\n'
    s["bad_id_range"] = b'{"prompt": [1], "response": [18446744073709551616]}\n'
    s["bad_empty_response"] = b'{"prompt": "a", "response": ""}\n'
    return s


def probe_items_seeds():
    """Probe items (train/probe_io.hpp): text and token items, labels, positions, 64-bit groups."""
    s = {}
    s["text"] = (b'{"text": "x=1;x=2;x?", "label": "2", "setting": "w2"}\n'
                 b'{"text": "y=5;y?", "label": 5, "position": 3, "group": 4294967297}\n')
    s["tokens"] = b'{"tokens": [1, 2, 3], "label": "a"}\n{"tokens": [299, 0], "label": "b", "position": 1, "group": -9223372036854775808}\n'
    s["bad_both"] = b'{"text": "a", "tokens": [1], "label": 1}\n'
    s["bad_duplicate_label"] = b'{"text": "a", "label": 1, "label": 2}\n'
    s["bad_position"] = b'{"text": "ab", "label": 1, "position": 9223372036854775807}\n'
    s["bad_group"] = b'{"text": "ab", "label": 1, "group": 18446744073709551615}\n'
    s["bad_label_long"] = b'{"text": "ab", "label": "' + b"L" * 300 + b'"}\n'
    s["bad_nul"] = b'{"text": "ab", "label": 1}\x00\n'
    return s


# ---------------------------------------------------------------------------------------------------

SEEDS = {
    "safetensors": safetensors_seeds,
    "config_json": config_json_seeds,
    "train_config": train_config_seeds,
    "npy": npy_seeds,
    "sft_jsonl": sft_jsonl_seeds,
    "probe_items": probe_items_seeds,
}


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    out = argv[1]
    names = argv[2:] or list(SEEDS)
    for n in names:
        if n not in SEEDS:
            print("make_fuzz_corpus.py: unknown harness %r (known: %s)" % (n, ", ".join(SEEDS)), file=sys.stderr)
            return 2
    for n in names:
        d = os.path.join(out, n)
        os.makedirs(d, exist_ok=True)
        for old in os.listdir(d):  # exactly this script's seeds, none from an older version of it
            os.remove(os.path.join(d, old))
        seeds = SEEDS[n]()
        for name, data in sorted(seeds.items()):
            with open(os.path.join(d, name), "wb") as fh:
                fh.write(data)
        print("%s: %d seed files in %s (%d bytes largest)" % (n, len(seeds), d, max(len(v) for v in seeds.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
