"""lm-evaluation-harness (docs/interop.md): `python -m fbt.lm_eval tasks DIR` writes fbt's reasoning tasks as local
lm-eval tasks (the problems `fbt eval` scores), the model "fbt" (python/fbt/lm_eval.py) answers them on the C++
decoder, and the same model exported with `fbt.export_hf` answers them through `--model hf` (the remote-code
FbtForCausalLM): generate_until gives the same responses, hence the same exact match, in soft and fused(2) mode,
and loglikelihood the same log-probabilities in standard mode; the adapter's loglikelihood is Decoder.score's, which
in soft mode differs from standard. Skipped without lm_eval, torch and transformers (and their datasets)."""
import json
import os

import numpy as np
import pytest

import fbt
import fbt.lm_eval as fle
from conftest import TINY

lm_eval = pytest.importorskip("lm_eval")
pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("lmeval")
    m = fbt.Model(dict(TINY, max_position_embeddings=256, input_norm="feedback_passes", gate_norm="shared", block_norm="sandwich"), seed=5)
    rng = np.random.default_rng(3)
    for name, w in m.named_parameters().items():
        w += rng.normal(0.0, 0.3 if name.startswith("model.feedback.") and w.ndim == 2 else 0.02, w.shape).astype(np.float32)
    ck, hf = d / "ck", d / "hf"
    m.save(str(ck))
    fbt.export_hf(m, str(hf))
    names = fle.write_tasks(str(d / "tasks"), tasks=("addition", "multihop"), n=6)
    return m, str(ck), str(hf), str(d / "tasks"), names


def evaluate(model, model_args, tasks, include, gen_kwargs=None):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    fle.make_lm_class()
    return simple_evaluate(model=model, model_args=model_args, tasks=tasks, task_manager=TaskManager(include_path=include),
                           log_samples=True, gen_kwargs=gen_kwargs, batch_size=4, bootstrap_iters=0)


def responses(res, task):
    return [s["filtered_resps"] for s in sorted(res["samples"][task], key=lambda s: s["doc_id"])]


def test_write_tasks(setup):
    m, ck, hf, tdir, names = setup
    assert names == ["fbt_addition", "fbt_addition_ll", "fbt_multihop", "fbt_multihop_ll"]
    ex = fbt.task_examples("addition", n=6)
    lines = open(os.path.join(tdir, "fbt_addition.jsonl")).read().splitlines()
    assert len(lines) == 6 and json.loads(lines[0])["prompt"] == ex[0]["prompt"] and ex[0]["prompt"].endswith("?\n")


@pytest.mark.parametrize("mode", ["soft", "fused(2)"])
def test_generate_until_is_the_same_through_both_routes(setup, mode):
    m, ck, hf, tdir, _ = setup
    a = evaluate("fbt", f"checkpoint={ck},mode={mode}", ["fbt_addition", "fbt_multihop"], tdir)
    b = evaluate("hf", f"pretrained={hf},trust_remote_code=True,add_bos_token=True,dtype=float32,device=cpu", ["fbt_addition", "fbt_multihop"], tdir,
                 gen_kwargs=f"decode_mode={mode}")
    for task in ("fbt_addition", "fbt_multihop"):
        ra, rb = [s["resps"] for s in sorted(a["samples"][task], key=lambda s: s["doc_id"])], \
                 [s["resps"] for s in sorted(b["samples"][task], key=lambda s: s["doc_id"])]
        assert ra == rb, f"{task} {mode}: the generated texts differ"
        assert responses(a, task) == responses(b, task)
        assert a["results"][task]["exact_match,answer"] == b["results"][task]["exact_match,answer"]
    # the adapter's texts are fbt.Decoder's greedy decodes of the prompt
    ex = fbt.task_examples("addition", n=6)
    first = sorted(a["samples"]["fbt_addition"], key=lambda s: s["doc_id"])[0]["resps"][0][0]
    want = fbt.Decoder(m).generate(ex[0]["prompt"], mode=mode, greedy=True, max_new_tokens=ex[0]["max_solution_bytes"] + 8, stop_token=256)
    text = bytes(t for t in want.tolist() if t < 256).decode("utf-8", errors="replace")
    assert first == text


def test_loglikelihood_in_standard_mode_is_the_same_through_both_routes(setup):
    m, ck, hf, tdir, _ = setup
    a = evaluate("fbt", f"checkpoint={ck},mode=standard", ["fbt_addition_ll"], tdir)
    b = evaluate("hf", f"pretrained={hf},trust_remote_code=True,add_bos_token=True,dtype=float32,device=cpu", ["fbt_addition_ll"], tdir)
    la = [s["resps"][0][0][0] for s in sorted(a["samples"]["fbt_addition_ll"], key=lambda s: s["doc_id"])]
    lb = [s["resps"][0][0][0] for s in sorted(b["samples"]["fbt_addition_ll"], key=lambda s: s["doc_id"])]
    np.testing.assert_allclose(la, lb, rtol=1e-5)
    soft = evaluate("fbt", f"checkpoint={ck},mode=soft", ["fbt_addition_ll"], tdir)
    ls = [s["resps"][0][0][0] for s in sorted(soft["samples"]["fbt_addition_ll"], key=lambda s: s["doc_id"])]
    assert max(abs(x - y) for x, y in zip(ls, la)) > 1e-3, "soft scoring feeds the state back: not standard's numbers"


def test_score_is_the_decoders(setup):
    m = setup[0]
    ctx, cont = "12+34=?\n", "#### 46\n"
    (lp, greedy), = fbt.Decoder(m).score([(ctx, cont)], mode="standard")
    lg = m.logits(ctx + cont, passes=1)[0, 0].astype(np.float64)  # (T, V), kSep first
    P = 1 + len(ctx)
    ids = list(cont.encode())
    want = sum(float(lg[P - 1 + j, t] - np.log(np.exp(lg[P - 1 + j] - lg[P - 1 + j].max()).sum()) - lg[P - 1 + j].max())
               for j, t in enumerate(ids))
    assert abs(lp - want) < 1e-4 * abs(want)
    with pytest.raises(TypeError, match="requests\\[0\\]: expected a \\(context, continuation\\) pair, got tuple of 1"):
        fbt.Decoder(m).score([("a",)])
    with pytest.raises(ValueError, match="requests\\[0\\]\\[1\\]: no tokens"):
        fbt.Decoder(m).score([("a", [])])
