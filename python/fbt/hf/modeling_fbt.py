"""modeling_fbt: the full-bandwidth transformer as a Hugging Face model (FbtForCausalLM), with its feedback.

`fbt export --hf DIR` (and `fbt.export_hf(model, DIR)`) writes this file, configuration_fbt.py, fbt_torch.py
(the one PyTorch implementation of the model, which this file wraps) and tokenization_fbt.py into DIR, and
config.json's auto_map names them, so that

    model = AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)
    tok = AutoTokenizer.from_pretrained(DIR, trust_remote_code=True)

is the fbt model: parameter names are fbt's checkpoint names (model.embed_tokens.weight, model.layers.{i}.*,
model.feedback.*, lm_head.weight when untied), and

  forward(input_ids, labels=None, passes=K, ...)   the K-pass forward of spec 3 with gradients: logits are
        pass K's (B, T, V); with labels (Hugging Face's convention: the model shifts them, -100 ignored) the
        loss is the K-pass objective loss_1 + lam/(K-1) * (loss_2 + ... + loss_K), and pass_losses holds the
        K losses. K defaults to config.passes (1: teacher forcing, what lm-evaluation-harness and a plain
        fine-tune see). Also: lam, sigma (the carried state's jitter, applied in train mode only), prefix,
        detach, grad_passes, doc_start ("separator": a separator token starts a document, fbt's default).
        attention_mask: right padding only (the padded positions are ignored by the loss; causal attention
        keeps them from the real tokens).
  generate(input_ids, decode_mode="soft", ...)     KV-cached decoding in the paper's modes: "standard",
        "soft", "fused(k)", optionally "/prefill=P" (standard, fused(k), recurrent, recurrent(k)); the mode
        also comes from generation_config.decode_mode or config.decode_mode. Greedy (do_sample False) or
        sampled (temperature, top_k, top_p); max_new_tokens / max_length; eos_token_id and stopping_criteria
        end a sequence; a left-padded batch (attention_mask) is decoded in lockstep, each row with its own cache.
        Returns the token ids (B, prompt + generated), rows that stopped early padded with pad_token_id. Beam search and
        return_dict_in_generate are refused by name.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_fbt import FbtConfig
from .fbt_torch import FBTCore, Config, Decoder, KVCache, RMSNorm, parse_mode


@dataclass
class FbtCausalLMOutput(CausalLMOutputWithPast):
    """CausalLMOutputWithPast plus the K-pass forward's per-pass losses (loss_1 .. loss_K)."""
    pass_losses: Optional[Tuple[torch.FloatTensor, ...]] = None


class FbtPreTrainedModel(PreTrainedModel):
    config_class = FbtConfig
    base_model_prefix = "fbt"
    supports_gradient_checkpointing = False
    _no_split_modules = ["Block"]
    _supports_sdpa = True

    def _init_weights(self, module):
        std = getattr(self.config, "initializer_range", 0.02)
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, std)
        elif isinstance(module, RMSNorm):
            nn.init.ones_(module.weight)


class FbtForCausalLM(FbtPreTrainedModel, FBTCore, GenerationMixin):
    """A full-bandwidth transformer (fbt_torch.FBTCore) as a transformers causal LM (see the module doc)."""

    def __init__(self, config: FbtConfig):
        super().__init__(config)
        self._build(Config.from_dict(config.fbt_dict()))
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def get_output_embeddings(self):
        return None if self.cfg.tie_word_embeddings else self.lm_head

    def forward(self, input_ids: Optional[torch.LongTensor] = None, attention_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.LongTensor] = None, passes: Optional[int] = None, lam: float = 1.0, sigma: float = 0.0,
                prefix=None, detach: bool = False, grad_passes: int = 0, doc_start="separator", inputs_embeds=None,
                past_key_values=None, use_cache: Optional[bool] = None, return_dict: Optional[bool] = None,
                output_hidden_states: Optional[bool] = None, **kwargs) -> FbtCausalLMOutput:
        if input_ids is None or inputs_embeds is not None:
            raise ValueError("FbtForCausalLM.forward: input_ids (B, T) are required (inputs_embeds: the layer-0 input of "
                             "a full-bandwidth model is computed from the tokens and the fed-back state)")
        if past_key_values is not None:
            raise ValueError("FbtForCausalLM.forward: past_key_values: decode with generate() (its KV cache holds the "
                             "fed-back state as well)")
        K = int(passes if passes is not None else getattr(self.config, "passes", 1) or 1)
        if K < 1 or (K > 1 and not self.cfg.feedback):
            raise ValueError(f"FbtForCausalLM.forward: passes {K}: expected 1" + ("" if not self.cfg.feedback else " or more"))
        targets = None
        if attention_mask is not None and not bool(attention_mask.all()):
            am = attention_mask.bool()
            if bool((am[:, 1:] & ~am[:, :-1]).any()):
                raise ValueError("FbtForCausalLM.forward: attention_mask: only right padding is supported (a row's "
                                 "tokens first, then its padding); decode a left-padded batch with generate()")
        if labels is not None:
            t = F.pad(labels[:, 1:], (0, 1), value=-100)
            if attention_mask is not None:
                t = torch.where(F.pad(attention_mask[:, 1:], (0, 1), value=0).bool(), t, torch.full_like(t, -100))
            targets = torch.where(t == -100, torch.full_like(t, -1), t)
        obj, losses, Hs = self.kpass(input_ids, targets, K=K, lam=lam, sigma=sigma if self.training else 0.0, prefix=prefix,
                                     detach=detach, grad_passes=grad_passes, doc_start=doc_start, states=True)
        return FbtCausalLMOutput(loss=obj, logits=self.logits(Hs[-1]), pass_losses=tuple(losses) if losses else None,
                                 hidden_states=tuple(Hs) if output_hidden_states else None)

    # ---- decoding
    def _pick(self, logits: torch.Tensor, gc: GenerationConfig, generator) -> int:
        if not gc.do_sample:
            return int(torch.argmax(logits))
        lg = logits.float() / max(float(gc.temperature or 1.0), 1e-6)
        if gc.top_k:
            kth = torch.topk(lg, min(int(gc.top_k), lg.shape[-1])).values[-1]
            lg = torch.where(lg < kth, torch.full_like(lg, float("-inf")), lg)
        if gc.top_p is not None and gc.top_p < 1.0:
            p, idx = torch.sort(torch.softmax(lg, -1), descending=True)
            drop = torch.cumsum(p, -1) - p > gc.top_p
            lg[idx[drop]] = float("-inf")
        return int(torch.multinomial(torch.softmax(lg, -1), 1, generator=generator))

    @torch.no_grad()
    def generate(self, input_ids: Optional[torch.LongTensor] = None, attention_mask: Optional[torch.Tensor] = None,
                 generation_config: Optional[GenerationConfig] = None, stopping_criteria=None, decode_mode: Optional[str] = None,
                 generator: Optional[torch.Generator] = None, **kwargs) -> torch.LongTensor:
        if input_ids is None:
            raise ValueError("FbtForCausalLM.generate: input_ids (B, P) are required")
        gc = copy.deepcopy(generation_config if generation_config is not None else self.generation_config)
        for k in ("logits_processor", "streamer", "synced_gpus", "assistant_model", "prefix_allowed_tokens_fn"):
            if kwargs.pop(k, None) is not None:
                raise NotImplementedError(f"FbtForCausalLM.generate: {k} is not supported")
        kwargs.pop("use_cache", None)
        kwargs.pop("output_scores", None)
        unused = gc.update(**kwargs)
        unused = {k: v for k, v in unused.items() if v is not None}
        if unused:
            raise ValueError(f"FbtForCausalLM.generate: unknown arguments {sorted(unused)}")
        if (gc.num_beams or 1) > 1 or (gc.num_return_sequences or 1) > 1 or gc.return_dict_in_generate:
            raise NotImplementedError("FbtForCausalLM.generate: num_beams > 1, num_return_sequences > 1 and "
                                      "return_dict_in_generate are not supported (greedy or sampled decoding)")
        mode = decode_mode or getattr(gc, "decode_mode", None) or getattr(self.config, "decode_mode", None) or "soft"
        parse_mode(mode)
        B, P = input_ids.shape
        if gc.max_new_tokens is not None:
            n_new = int(gc.max_new_tokens)
        else:
            n_new = int(gc.max_length or 20) - P
        eos = gc.eos_token_id
        eos = set() if eos is None else {int(eos)} if isinstance(eos, int) else {int(e) for e in eos}
        pad = gc.pad_token_id if gc.pad_token_id is not None else (min(eos) if eos else 0)
        dev = input_ids.device
        dec = Decoder(self)
        caches, logits = [], []
        for b in range(B):  # each row its own cache (a left-padded row without its padding)
            ids = input_ids[b] if attention_mask is None else input_ids[b][attention_mask[b].bool()]
            if ids.numel() == 0:
                raise ValueError(f"FbtForCausalLM.generate: row {b} has an empty prompt")
            cap = min(self.cfg.max_position_embeddings, int(ids.numel()) + max(n_new, 0))
            cache = KVCache(self, 1, max(cap, int(ids.numel())))
            logits.append(dec.prefill(cache, ids[None], mode)[0] if n_new > 0 else None)
            caches.append(cache)
        new = torch.empty(B, 0, dtype=input_ids.dtype, device=dev)
        done = torch.zeros(B, dtype=torch.bool, device=dev)
        for i in range(max(n_new, 0)):  # the rows in lockstep, as transformers decodes a batch
            toks = [pad if bool(done[b]) else self._pick(logits[b], gc, generator) for b in range(B)]
            new = torch.cat([new, torch.tensor(toks, dtype=input_ids.dtype, device=dev)[:, None]], 1)
            for b, t in enumerate(toks):
                if t in eos:
                    done[b] = True
            if stopping_criteria is not None:
                scores = torch.stack([lg if lg is not None else torch.zeros_like(logits[0]) for lg in logits])
                done |= torch.as_tensor(stopping_criteria(torch.cat([input_ids, new], 1), scores), dtype=torch.bool, device=dev).expand(B)
            if bool(done.all()) or i + 1 == n_new:
                break
            for b in range(B):
                if not bool(done[b]):
                    if caches[b].len >= caches[b].capacity:
                        done[b] = True
                    else:
                        logits[b] = dec.step(caches[b], torch.tensor([toks[b]], device=dev), mode)[0]
            if bool(done.all()):
                break
        return torch.cat([input_ids, new], 1)


__all__ = ["FbtForCausalLM", "FbtPreTrainedModel", "FbtCausalLMOutput"]
