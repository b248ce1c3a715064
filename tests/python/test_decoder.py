"""fbt.Decoder: generate equal to `fbt sample` in every mode (greedy, and sampled with n samples), the KV cache
kept across calls (resume), Ctrl-C, and the decoder's refusals."""
import _thread
import threading
import time

import numpy as np
import pytest

import fbt
from conftest import TINY, run_cli

PROMPT = "Once upon a"
MODES = ["standard", "soft", "fused(1)", "fused(2)"]


@pytest.fixture(scope="module")
def fed_model():
    """A tiny model whose feedback weights are large enough that the modes decode differently."""
    m = fbt.Model(dict(TINY, max_position_embeddings=256), seed=21)
    rng = np.random.default_rng(0)
    for name, w in m.named_parameters().items():
        if name.startswith("model.feedback.") and w.ndim == 2:
            w[...] = rng.normal(0.0, 0.3, w.shape).astype(np.float32)
    return m


@pytest.fixture(scope="module")
def fed_checkpoint(fed_model, tmp_path_factory):
    ck = tmp_path_factory.mktemp("dec") / "ck"
    fed_model.save(str(ck))
    return ck


def cli_sample(ck, mode, n=1, temperature=0.0, seed=1, max_new=24, prefill=None):
    args = ["sample", "--checkpoint", ck, "--prompt", PROMPT, "--mode", mode, "--temperature", temperature, "--seed", seed,
            "--n", n, "--max_new_tokens", max_new, "--output", "ids"]
    if prefill:
        args += ["--prefill", prefill]
    lines = run_cli(*args).strip().splitlines()
    outs = [lines[i + 1] for i, l in enumerate(lines) if l.startswith("--- sample")]
    return [np.array([int(x) for x in o.split(",")], np.int32) for o in outs]


@pytest.mark.parametrize("mode", MODES)
def test_greedy_equals_fbt_sample(fed_model, fed_checkpoint, mode):
    ref = cli_sample(fed_checkpoint, mode)[0]
    out = fbt.Decoder(fed_model).generate(PROMPT, mode=mode, greedy=True, max_new_tokens=24)
    assert out.dtype == np.int32 and np.array_equal(out, ref), (mode, out, ref)


def test_recurrent_prefill_equals_fbt_sample(fed_model, fed_checkpoint):
    ref = cli_sample(fed_checkpoint, "soft", prefill="recurrent")[0]
    assert np.array_equal(fbt.Decoder(fed_model).generate(PROMPT, prefill="recurrent", greedy=True, max_new_tokens=24), ref)


def test_modes_differ(fed_model):
    d = fbt.Decoder(fed_model)
    outs = {m: d.generate(PROMPT, mode=m, greedy=True, max_new_tokens=24).tobytes() for m in MODES}
    assert len(set(outs.values())) >= 2, "the feedback weights should change the greedy continuation"


def test_sampled_n_equals_fbt_sample(fed_model, fed_checkpoint):
    ref = cli_sample(fed_checkpoint, "soft", n=3, temperature=0.9, seed=5)
    outs = fbt.Decoder(fed_model).generate(PROMPT, mode="soft", temperature=0.9, seed=5, n=3, max_new_tokens=24)
    assert isinstance(outs, list) and len(outs) == 3
    for o, r in zip(outs, ref):
        assert np.array_equal(o, r)


def test_resume_goes_on_from_the_kept_cache(fed_model):
    d = fbt.Decoder(fed_model)
    whole = d.generate(PROMPT, temperature=0.7, seed=3, max_new_tokens=30)
    first = d.generate(PROMPT, temperature=0.7, seed=3, max_new_tokens=12, context=64)
    assert d.sequences == 1 and d.context == 64 and d.lengths == [len(PROMPT) + 1 + 11]
    rest = d.generate(None, resume=True, temperature=0.7, max_new_tokens=18)  # sampling options are per call
    assert np.array_equal(np.concatenate([first, rest]), whole)
    more = d.generate(" and then", resume=True, max_new_tokens=5, greedy=True)
    assert more.shape == (5,) and d.lengths == [len(PROMPT) + 1 + 30 + len(" and then") + 4]
    with pytest.raises(ValueError, match="positions"):
        d.generate(None, resume=True, max_new_tokens=64)
    assert d.sequences == 0  # a refused resume ends the session
    with pytest.raises(ValueError, match="resume"):
        d.generate(None, resume=True)


def test_resume_refuses_a_mode_change(fed_model):
    d = fbt.Decoder(fed_model)
    d.generate(PROMPT, mode="soft", max_new_tokens=2, context=32)
    with pytest.raises(ValueError, match="mode"):
        d.generate("x", resume=True, mode="standard", max_new_tokens=2)
    d.reset()
    assert d.sequences == 0


def test_baseline_decodes_in_standard_mode():
    m = fbt.Model(dict(TINY, fuser="none"), seed=2)
    d = fbt.Decoder(m)
    out = d.generate("ab", greedy=True, max_new_tokens=5)
    assert out.shape == (5,) and d.mode == "standard"
    with pytest.raises(ValueError, match="baseline"):
        d.generate("ab", mode="soft")


def test_stop_token_and_zero_tokens(fed_model):
    d = fbt.Decoder(fed_model)
    full = d.generate(PROMPT, greedy=True, max_new_tokens=10)
    stop = int(full[3])
    cut = d.generate(PROMPT, greedy=True, max_new_tokens=10, stop_token=stop)
    assert np.array_equal(cut, full[: list(full).index(stop) + 1])
    # issue 47: 0 tokens is refused as `fbt sample --max_new_tokens 0` is (it returned an empty array)
    with pytest.raises(ValueError, match="max_new_tokens: must be >= 1"):
        d.generate(PROMPT, max_new_tokens=0)


@pytest.mark.parametrize("kwargs,says", [
    (dict(max_new_tokens=-1), "max_new_tokens"),
    (dict(max_new_tokens=10 ** 9), "max_new_tokens"),
    (dict(max_new_tokens=250), "max_new_tokens|positions"),
    (dict(temperature=-1.0), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_k=-2), "top_k"),
    (dict(n=0), "n:"),
    (dict(mode="sideways"), "sideways"),
    (dict(prefill="backwards"), "backwards"),
    (dict(stop_token=999), "stop_token"),
    (dict(context=10 ** 6), "context"),
])
def test_refusals_name_the_argument(fed_model, kwargs, says):
    with pytest.raises(ValueError, match=says):
        fbt.Decoder(fed_model).generate(PROMPT, **kwargs)


def test_prompt_refusals(fed_model):
    d = fbt.Decoder(fed_model)
    with pytest.raises(ValueError, match="prompt"):
        d.generate(np.zeros((2, 3), np.int32))
    with pytest.raises(ValueError, match="prompt.*outside"):
        d.generate([256, 300])
    with pytest.raises(TypeError, match="prompt"):
        d.generate(np.array([1.5, 2.5]))
    with pytest.raises(TypeError, match="prompt"):
        d.generate(None)


def test_ctrl_c_stops_a_long_generation_cleanly():
    # big enough that 4000 tokens take seconds (a 4-layer D 128 model decodes them in about 0.3 s)
    m = fbt.Model(dict(num_hidden_layers=8, hidden_size=512, num_attention_heads=8, num_key_value_heads=8,
                       intermediate_size=1536, max_position_embeddings=4096), seed=1)
    d = fbt.Decoder(m)
    for attempt in range(3):  # the interrupt must land while the call runs: a longer call on a retry
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        t0 = time.perf_counter()
        try:
            d.generate("x", max_new_tokens=4000 if attempt < 2 else 4090, context=4096)
        except KeyboardInterrupt:
            assert time.perf_counter() - t0 < 10
            assert d.sequences == 0  # the half-run session was dropped
            assert d.generate("x", greedy=True, max_new_tokens=3).shape == (3,)  # and the decoder still works
            return
        finally:
            timer.cancel()
        try:  # an interrupt that came after the call lands here, outside it
            time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    pytest.fail("no KeyboardInterrupt reached generate() in 3 attempts")


def test_the_decoder_keeps_its_model_alive():
    import gc
    m = fbt.Model(TINY, seed=4)
    ref = fbt.Decoder(m).generate(PROMPT, greedy=True, max_new_tokens=5)
    d = fbt.Decoder(m)
    del m
    gc.collect()
    assert np.array_equal(d.generate(PROMPT, greedy=True, max_new_tokens=5), ref)
    assert d.model.num_layers == TINY["num_hidden_layers"]


def test_a_session_of_several_samples_resumes_each(fed_model):
    d = fbt.Decoder(fed_model)
    whole = d.generate(PROMPT, temperature=0.9, seed=8, n=2, max_new_tokens=16)
    first = d.generate(PROMPT, temperature=0.9, seed=8, n=2, max_new_tokens=6, context=40)
    rest = d.generate(None, resume=True, temperature=0.9, max_new_tokens=10)
    assert isinstance(rest, list) and len(rest) == 2 and d.sequences == 2
    for i in range(2):
        assert np.array_equal(np.concatenate([first[i], rest[i]]), whole[i])
