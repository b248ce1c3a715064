"""tokenization_fbt: fbt's byte tokenizer for transformers (AutoTokenizer with trust_remote_code=True).

Tokens 0..255 are the bytes of the UTF-8 text, token 256 the document separator "<|sep|>" (bos, eos and pad):
what include/fbt/data/tokenizer.hpp does. A document starts with the separator: encode(text) gives
[256] + the bytes (add_special_tokens=False: the bytes alone, as lm-evaluation-harness asks for them unless
add_bos_token=True). Decoding turns the separator into "<|sep|>" and invalid UTF-8 into U+FFFD.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from transformers import PreTrainedTokenizer

SEP_TOKEN = "<|sep|>"


class FbtByteTokenizer(PreTrainedTokenizer):
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, bos_token=SEP_TOKEN, eos_token=SEP_TOKEN, pad_token=SEP_TOKEN, unk_token=SEP_TOKEN,
                 add_bos_token=True, **kwargs):
        self.add_bos_token = add_bos_token
        super().__init__(bos_token=bos_token, eos_token=eos_token, pad_token=pad_token, unk_token=unk_token, **kwargs)

    @property
    def vocab_size(self) -> int:
        return 257

    def get_vocab(self) -> Dict[str, int]:
        v = {chr(i): i for i in range(256)}
        v[SEP_TOKEN] = 256
        return v

    def _tokenize(self, text: str, **kwargs) -> List[str]:
        return [chr(b) for b in text.encode("utf-8")]

    def _convert_token_to_id(self, token: str) -> int:
        if token == SEP_TOKEN:
            return 256
        return ord(token) if len(token) == 1 and ord(token) < 256 else 256

    def _convert_id_to_token(self, index: int) -> str:
        return SEP_TOKEN if index == 256 else chr(index)

    def convert_tokens_to_string(self, tokens: List[str]) -> str:
        out, buf = [], bytearray()
        for t in tokens:
            if t == SEP_TOKEN:
                out.append(buf.decode("utf-8", errors="replace"))
                out.append(SEP_TOKEN)
                buf = bytearray()
            else:
                buf.extend(ord(c) for c in t)
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)

    def build_inputs_with_special_tokens(self, token_ids_0: List[int], token_ids_1: Optional[List[int]] = None) -> List[int]:
        bos = [256] if self.add_bos_token else []
        out = bos + token_ids_0
        return out if token_ids_1 is None else out + bos + token_ids_1

    def get_special_tokens_mask(self, token_ids_0, token_ids_1=None, already_has_special_tokens=False):
        if already_has_special_tokens:
            return [1 if t == 256 else 0 for t in token_ids_0]
        bos = [1] if self.add_bos_token else []
        out = bos + [0] * len(token_ids_0)
        return out if token_ids_1 is None else out + bos + [0] * len(token_ids_1)

    def save_vocabulary(self, save_directory: str, filename_prefix: Optional[str] = None) -> Tuple[str, ...]:
        return ()  # the vocabulary is the bytes: nothing to write
