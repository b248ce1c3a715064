"""fbt.lm_eval: lm-evaluation-harness on fbt's own engine, and fbt's reasoning tasks as lm-eval tasks.

    python -m fbt.lm_eval tasks DIR                    # writes fbt_addition, fbt_state_tracking, fbt_multihop
                                                       # (+ their _ll loglikelihood variants) as YAML + JSONL
    python -m fbt.lm_eval --model fbt --model_args checkpoint=RUN/checkpoint,mode=soft \\
        --tasks fbt_addition --include_path DIR        # lm_eval's own command line, with `--model fbt` known
    lm_eval --model hf --model_args pretrained=EXPORT,trust_remote_code=True,add_bos_token=True \\
        --tasks fbt_addition --include_path DIR --gen_kwargs decode_mode=soft
                                                       # the same model exported (fbt export --hf), through transformers

The model "fbt" (FbtLM, docs/interop.md) answers lm-eval's three request types with the C++ decoder
(fbt.Decoder):
  loglikelihood          fbt.Decoder.score: the context prefilled in the mode's prefill, each continuation token
                         fed as a decoding step (the mode decides the feedback), batch_size requests decoded
                         together; returns (sum of log p, greedy)
  loglikelihood_rolling  the same over a whole text (its first token is the context)
  generate_until         fbt.Decoder.generate, greedy or sampled as the request's gen_kwargs say, cut at the first
                         `until` string
model_args: checkpoint (an fbt checkpoint, model file or Hugging Face directory; required), mode (default soft, standard
for a baseline; MODE/prefill=P allowed), batch_size (default 16), max_gen_toks (default 256), add_bos_token (default true:
a context starts a document, kSep first, as fbt reads text; false: the bytes alone). Byte-level models (vocab_size 257) only:
text is UTF-8 bytes, as fbt's tokenizer makes it.

Both routes give the same numbers on the same model: generate_until (the tasks' exact match) in every mode, and
loglikelihood in standard mode, where the remote-code model's forward (teacher forcing, pass 1) is the decoder's
standard scoring (tests/python/test_lm_eval.py). lm-eval itself is optional: `pip install lm_eval`.
"""
from __future__ import annotations

import json
import os
import sys
from typing import List, Optional, Sequence, Tuple

import fbt

TASKS = ("addition", "state_tracking", "multihop")


# ----------------------------------------------------------------------------------------------- tasks

def _yaml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a YAML double-quoted scalar


def write_tasks(out_dir: str, tasks: Sequence[str] = TASKS, n: int = 100, difficulty: int = 4, length_mult: int = 1,
                loglikelihood: bool = True) -> List[str]:
    """Writes fbt's reasoning tasks as local lm-eval tasks into out_dir: for each task fbt_<task> (generate_until:
    greedy decoding from the prompt, the answer read as fbt reads it: the text between the first "#### " and the next
    newline; exact match against the answer), and with loglikelihood fbt_<task>_ll (the reference solution's
    log-likelihood after the prompt: acc = it is the greedy continuation, and perplexity). The problems are the n that
    `fbt eval` scores (the evaluation's seed), so the accuracy lm-eval reports is fbt eval's for the same mode. Returns
    the task names; give out_dir to lm_eval as --include_path."""
    os.makedirs(out_dir, exist_ok=True)
    out_dir = os.path.abspath(out_dir)
    names = []
    for task in tasks:
        ex = fbt.task_examples(task, n=n, difficulty=difficulty, length_mult=length_mult)
        suffix = "" if (difficulty, length_mult) == (4, 1) else f"_d{difficulty}x{length_mult}"
        name = f"fbt_{task}{suffix}"
        data = os.path.join(out_dir, name + ".jsonl")
        with open(data + ".tmp", "w", encoding="utf-8") as f:
            for e in ex:
                f.write(json.dumps({k: e[k] for k in ("prompt", "solution", "answer", "level")}) + "\n")
        os.replace(data + ".tmp", data)
        budget = ex[0]["max_solution_bytes"] + 8 if ex else 64  # as fbt eval: the longest solution and a margin
        common = [f"dataset_path: json", "dataset_kwargs:", "  data_files:", f"    test: {_yaml_str(data)}", "test_split: test",
                  "doc_to_text: \"{{prompt}}\""]
        gen = [f"task: {name}"] + common + [
            "output_type: generate_until", "doc_to_target: \"{{answer}}\"",
            "generation_kwargs:", "  until: [\"<|sep|>\"]", f"  max_gen_toks: {budget}", "  do_sample: false",
            "filter_list:", "  - name: answer", "    filter:", "      - function: regex",
            "        regex_pattern: \"#### *([^\\\\n]*?)[ \\\\r]*\\\\n\"", "      - function: take_first",
            "metric_list:", "  - metric: exact_match", "    aggregation: mean", "    higher_is_better: true",
            "metadata:", "  version: 1.0"]
        with open(os.path.join(out_dir, name + ".yaml"), "w", encoding="utf-8") as f:
            f.write("\n".join(gen) + "\n")
        names.append(name)
        if loglikelihood:
            ll = [f"task: {name}_ll"] + common + [
                "output_type: loglikelihood", "doc_to_target: \"{{solution}}\"", "target_delimiter: \"\"",
                "metric_list:", "  - metric: acc", "    aggregation: mean", "    higher_is_better: true",
                "  - metric: perplexity", "    aggregation: perplexity", "    higher_is_better: false",
                "metadata:", "  version: 1.0"]
            with open(os.path.join(out_dir, name + "_ll.yaml"), "w", encoding="utf-8") as f:
                f.write("\n".join(ll) + "\n")
            names.append(name + "_ll")
    return names


# ----------------------------------------------------------------------------------------------- the model

def _truthy(v) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"fbt lm_eval model: expected true or false, got {v!r}")


_LM_CLASS: Optional[type] = None


def make_lm_class():
    """FbtLM, registered with lm-eval as "fbt" (lm_eval imported here: it is optional); made once."""
    global _LM_CLASS
    if _LM_CLASS is not None:
        return _LM_CLASS
    import lm_eval.models  # noqa: F401  (lm-eval's own models first: its registry imports them only while empty)
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model

    class FbtLM(LM):
        """lm-evaluation-harness model "fbt": fbt's C++ decoder (see the module's doc)."""

        def __init__(self, checkpoint: Optional[str] = None, mode: Optional[str] = None, batch_size=16, max_gen_toks=256,
                     add_bos_token=True, **kwargs):
            super().__init__()
            if not checkpoint:
                raise ValueError("fbt lm_eval model: checkpoint=PATH is required (an fbt checkpoint or a Hugging Face directory)")
            unknown = {k for k in kwargs if k not in ("device", "dtype", "trust_remote_code")}
            if unknown:
                raise ValueError(f"fbt lm_eval model: unknown model_args {sorted(unknown)} (expected checkpoint, mode, batch_size, "
                                 "max_gen_toks, add_bos_token)")
            self.model = fbt.Model.load(str(checkpoint))
            if self.model.vocab_size != 257:
                raise ValueError(f"fbt lm_eval model: {checkpoint}: vocab_size {self.model.vocab_size}; the adapter reads text with "
                                 "fbt's byte tokenizer (vocab_size 257)")
            self.mode = mode or ("soft" if self.model.has_feedback else "standard")
            self.batch_size_ = int(str(batch_size).split(":")[0]) if str(batch_size) != "auto" else 16
            self.max_gen_toks = int(max_gen_toks)
            self.add_bos = _truthy(add_bos_token)
            self.decoder = fbt.Decoder(self.model)
            self.max_length = self.model.config.max_position_embeddings

        def _ctx(self, text: str) -> List[int]:
            b = list(text.encode("utf-8"))
            return ([256] + b) if self.add_bos else b

        def loglikelihood(self, requests, disable_tqdm: bool = False) -> List[Tuple[float, bool]]:
            pairs = []
            for r in requests:
                ctx, cont = r.args
                # lm-eval's convention (TemplateLM._encode_pair, what --model hf does): the context's trailing
                # whitespace moves to the continuation, so both routes score the same tokens
                n_spaces = len(ctx) - len(ctx.rstrip())
                if n_spaces > 0:
                    ctx, cont = ctx[:-n_spaces], ctx[-n_spaces:] + cont
                c = self._ctx(ctx)
                if not c:  # no context and no separator: the continuation's first token is the context
                    b = list(cont.encode("utf-8"))
                    c, cont_ids = b[:1], b[1:]
                else:
                    cont_ids = list(cont.encode("utf-8"))
                pairs.append((c, cont_ids))
            out: List[Tuple[float, bool]] = [(0.0, True)] * len(pairs)
            todo = [i for i, (_, cont) in enumerate(pairs) if cont]
            res = self.decoder.score([pairs[i] for i in todo], mode=self.mode, batch_size=self.batch_size_) if todo else []
            for i, r in zip(todo, res):
                out[i] = (float(r[0]), bool(r[1]))
            return out

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> List[float]:
            pairs: List[Optional[Tuple[List[int], List[int]]]] = []
            for r in requests:
                (text,) = r.args
                ids = self._ctx(text)
                if len(ids) < 2:
                    pairs.append(None)
                    continue
                if len(ids) > self.max_length:
                    raise ValueError(f"fbt lm_eval model: a text of {len(ids)} tokens is longer than max_position_embeddings "
                                     f"({self.max_length}); rolling windows are not implemented")
                pairs.append((ids[:1], ids[1:]))
            todo = [i for i, p in enumerate(pairs) if p is not None]
            reqs = [p for p in pairs if p is not None]
            res = self.decoder.score(reqs, mode=self.mode, batch_size=self.batch_size_) if reqs else []
            out = [0.0] * len(pairs)
            for i, r in zip(todo, res):
                out[i] = float(r[0])
            return out

        def generate_until(self, requests, disable_tqdm: bool = False) -> List[str]:
            outs = []
            for r in requests:
                ctx, gen_kwargs = r.args
                kw = dict(gen_kwargs or {})
                until = kw.pop("until", None) or []
                if isinstance(until, str):
                    until = [until]
                n = int(kw.pop("max_gen_toks", self.max_gen_toks))
                temperature = float(kw.pop("temperature", 0.0) or 0.0)
                do_sample = _truthy(kw.pop("do_sample", temperature > 0))
                top_k = int(kw.pop("top_k", 0) or 0)
                top_p = float(kw.pop("top_p", 1.0) or 1.0)
                mode = kw.pop("decode_mode", self.mode)
                kw.pop("seed", None)
                if kw:
                    raise ValueError(f"fbt lm_eval model: unknown generation arguments {sorted(kw)}")
                ids = self._ctx(ctx)
                n = max(0, min(n, self.max_length - len(ids)))
                if n == 0:
                    outs.append("")
                    continue
                got = self.decoder.generate(ids, mode=mode, greedy=not do_sample or temperature == 0.0, temperature=temperature or 1.0,
                                            top_k=top_k, top_p=top_p, max_new_tokens=n, stop_token=256)
                toks = [int(t) for t in (got[0] if isinstance(got, list) else got)]  # n = 1: one array
                text = bytes(t for t in toks if t < 256).decode("utf-8", errors="replace")
                if toks and toks[-1] == 256:
                    text += "<|sep|>"
                for u in until:
                    if u and u in text:
                        text = text[:text.index(u)]
                outs.append(text)
            return outs

    register_model("fbt")(FbtLM)
    _LM_CLASS = FbtLM
    return FbtLM


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tasks"]:
        import argparse
        ap = argparse.ArgumentParser(prog="python -m fbt.lm_eval tasks", description="fbt's reasoning tasks as local lm-eval tasks")
        ap.add_argument("dir")
        ap.add_argument("--tasks", default=",".join(TASKS))
        ap.add_argument("--n", type=int, default=100)
        ap.add_argument("--difficulty", type=int, default=4)
        ap.add_argument("--length_mult", type=int, default=1)
        a = ap.parse_args(argv[1:])
        names = write_tasks(a.dir, [t for t in a.tasks.split(",") if t], a.n, a.difficulty, a.length_mult)
        print(f"wrote {len(names)} tasks to {a.dir}: {', '.join(names)} (lm_eval --include_path {a.dir} --tasks ...)")
        return 0
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        print("python -m fbt.lm_eval: lm-evaluation-harness is not installed (pip install lm_eval)", file=sys.stderr)
        return 1
    make_lm_class()
    from lm_eval.__main__ import cli_evaluate
    sys.argv = ["lm_eval"] + argv
    cli_evaluate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
