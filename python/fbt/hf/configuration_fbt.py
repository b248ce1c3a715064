"""configuration_fbt: the Hugging Face config of a full-bandwidth transformer (model_type "fbt").

Written by `fbt export --hf DIR` (and `fbt.export_hf`) into DIR with modeling_fbt.py and fbt_torch.py, and
named in config.json's auto_map, so that

    AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)

builds the model with its feedback (docs/interop.md). config.json holds fbt's own model config at the top
level (every key of include/fbt/io/config_json.hpp's to_json: the Qwen3 sizes plus fuser, feedback_source,
input_norm, gate_norm, block_norm, sliding windows, ...), which fbt reads back, plus keys for transformers:
  decode_mode     the mode generate() decodes in when not given one: "standard", "soft" (the default),
                  "fused(k)", optionally "/prefill=P" (docs/decoding.md)
  passes          the passes K of forward() when not given (default 1: teacher forcing; K > 1 is the
                  K-pass objective, spec 3, whose loss the model returns with labels)
  bos_token_id, eos_token_id, pad_token_id   the document separator (256) of fbt's byte vocabulary
"""
from __future__ import annotations

from transformers import PretrainedConfig


class FbtConfig(PretrainedConfig):
    model_type = "fbt"

    def __init__(self, decode_mode: str = "soft", passes: int = 1, **kwargs):
        self.decode_mode = decode_mode
        self.passes = passes
        kwargs.setdefault("tie_word_embeddings", True)
        super().__init__(**kwargs)

    def fbt_dict(self) -> dict:
        """fbt's model config (the keys fbt_torch.Config.from_dict reads)."""
        d = self.to_dict()
        d["model_type"] = "fbt"
        return d
