"""Fuzzing the argument conversion with hypothesis (bounded: a few seconds): whatever object a `tokens`, `prompt`,
config field or decoding option is given, the call returns or raises TypeError/ValueError naming the
argument, never another exception and never a crash."""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (scripts/setup.sh)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import fbt  # noqa: E402
from conftest import TINY  # noqa: E402

MODEL = fbt.Model(TINY, seed=3)
DECODER = fbt.Decoder(MODEL)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float32, np.float64,
          np.bool_, np.complex64]


@st.composite
def arrays(draw):
    a = draw(hnp.arrays(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
                        ))
    if a.dtype.kind in "iu":
        a = np.clip(a, np.iinfo(a.dtype).min, np.iinfo(a.dtype).max)
    if draw(st.booleans()) and a.ndim >= 1 and a.shape[-1] > 1:
        a = a[..., ::2]  # a strided view
    return a


TOKENS = st.one_of(
    st.none(), st.integers(), st.floats(), st.text(max_size=12), st.binary(max_size=12),
    st.lists(st.integers(-5, 400), max_size=8),
    st.lists(st.lists(st.integers(-2, 300), max_size=4), max_size=3),
    st.lists(st.one_of(st.integers(0, 256), st.floats(), st.text(max_size=2)), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    arrays(),
)


def names_an_argument(e, *names):
    return any(n in str(e) for n in names) or "incompatible function arguments" in str(e)


@FAST
@given(TOKENS)
def test_logits_tokens(x):
    try:
        out = MODEL.logits(x, passes=1)
    except (TypeError, ValueError) as e:
        assert names_an_argument(e, "tokens"), str(e)
        return
    assert out.ndim == 4 and out.shape[0] == 1 and np.isfinite(out).all()


@FAST
@given(TOKENS, st.integers(-2, 4))
def test_hidden_states_tokens(x, depth):
    try:
        out = MODEL.hidden_states(x, layers=[depth])
    except (TypeError, ValueError) as e:
        assert names_an_argument(e, "tokens", "layers"), str(e)
        return
    assert out.shape[0] == 1


@FAST
@given(TOKENS, st.one_of(st.integers(-10, 40), st.integers(-2 ** 70, 2 ** 70)), st.floats(allow_nan=True), st.integers(-3, 300),
       st.floats(-1, 2), st.integers(-2, 3), st.sampled_from(["soft", "standard", "fused(1)", "fused(0)", "x", "fused(-1)", ""]))
def test_generate_arguments(prompt, max_new, temperature, top_k, top_p, n, mode):
    try:
        out = DECODER.generate(prompt, max_new_tokens=max_new, temperature=temperature, top_k=top_k, top_p=top_p, n=n, mode=mode)
    except (TypeError, ValueError) as e:
        assert names_an_argument(e, "prompt", "max_new_tokens", "temperature", "top_k", "top_p", "n:", "mode", "fused", "decoding mode",
                                 "policy", "positions"), str(e)
        return
    outs = out if isinstance(out, list) else [out]
    for o in outs:
        assert o.dtype == np.int32 and len(o) <= max_new and ((o >= 0) & (o < 257)).all()


FIELD_VALUES = st.one_of(st.integers(-2 ** 40, 2 ** 40), st.integers(-3, 300), st.floats(), st.booleans(), st.text(max_size=8),
                         st.none(), st.lists(st.integers(-2, 8), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
FIELDS = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
          "intermediate_size", "max_position_embeddings", "rope_theta", "rms_norm_eps", "qk_norm", "z_loss", "doc_attention",
          "layer_intermediate_size", "sliding_window", "layer_types", "fuser", "fuser_options", "feedback_source",
          "feedback_layer", "input_norm", "gate_norm", "block_norm", "not_a_field"]


@FAST
@given(st.dictionaries(st.sampled_from(FIELDS), FIELD_VALUES, max_size=4))
def test_config_fields(fields):
    try:
        c = fbt.ModelConfig(**fields)
    except (TypeError, ValueError) as e:
        assert any(f in str(e) for f in fields) or "ModelConfig" in str(e), str(e)
        return
    c.validate()
    assert fbt.ModelConfig.from_dict(c.to_dict()) == c
