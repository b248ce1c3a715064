"""fbt.ModelConfig: every field of the C++ config, from_dict/to_dict through the library's JSON reader, and
ValueError naming the field for a bad value."""
import copy
import pickle

import numpy as np

import pytest

import fbt

FIELDS = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
          "intermediate_size", "max_position_embeddings", "rope_theta", "rms_norm_eps", "tie_word_embeddings", "qk_norm",
          "initializer_range", "z_loss", "doc_attention", "layer_intermediate_size", "layer_num_attention_heads",
          "layer_num_key_value_heads", "sliding_window", "layer_types", "fuser", "fuser_options", "block", "block_options",
          "layer_blocks", "feedback_source", "feedback_layer", "input_norm", "gate_norm", "in_norm_init", "block_norm",
          "glu_init", "gated_add_alpha"]


def test_every_field_is_an_attribute():
    c = fbt.ModelConfig()
    for f in FIELDS:
        assert hasattr(c, f), f
    assert c.vocab_size == 257 and c.fuser == "glu" and c.hidden_size == 128


def test_keywords_set_fields_and_head_dim_follows_hidden_size():
    c = fbt.ModelConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=2, fuser="none")
    assert (c.hidden_size, c.num_attention_heads, c.fuser) == (64, 2, "none")
    assert c.to_dict()["head_dim"] == 32
    assert not c.feedback


def test_dict_round_trip():
    c = fbt.ModelConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, fuser="gated_add",
                        fuser_options={"alpha": 0.25}, rope_theta=500000.0)
    d = c.to_dict()
    assert d["fuser_options"] == {"alpha": 0.25}
    c2 = fbt.ModelConfig.from_dict(d)
    assert c2 == c and c2.to_dict() == d
    assert c2.fuser_options == {"alpha": 0.25}


def test_copy_and_pickle():
    c = fbt.ModelConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=1)
    for c2 in (copy.copy(c), copy.deepcopy(c), pickle.loads(pickle.dumps(c))):
        assert c2 == c
        c2.hidden_size = 96
        assert c.hidden_size == 64


@pytest.mark.parametrize("field,value,says", [
    ("hidden_size", -1, "hidden_size"),
    ("num_hidden_layers", 0, "num_hidden_layers"),
    ("num_key_value_heads", 3, "num_key_value_heads"),
    ("doc_attention", "sideways", "doc_attention"),
    ("rms_norm_eps", float("nan"), "rms_norm_eps"),
    ("bogus_field", 1, "bogus_field"),
    ("hidden_size", "wide", "hidden_size"),
])
def test_bad_value_is_a_value_error_naming_the_field(field, value, says):
    with pytest.raises(ValueError, match=says):
        fbt.ModelConfig(**{field: value})


def test_unknown_fuser_is_refused_when_a_model_is_built():
    c = fbt.ModelConfig(fuser="nope")  # a user fuser's name is a valid config; a module that lacks it refuses it
    with pytest.raises(ValueError, match="fuser.*nope"):
        fbt.Model(c)


def test_attribute_type_is_checked():
    c = fbt.ModelConfig()
    with pytest.raises(TypeError):
        c.hidden_size = "wide"
    c.hidden_size = -3  # a plain assignment is checked by validate() and by every use
    with pytest.raises(ValueError, match="hidden_size"):
        c.validate()
    with pytest.raises(ValueError, match="hidden_size"):
        fbt.Model(c)


def test_hf_qwen3_dict_reads_as_a_baseline():
    d = {"model_type": "qwen3", "vocab_size": 300, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "max_position_embeddings": 256,
         "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}
    c = fbt.ModelConfig.from_dict(d)
    assert c.fuser == "none" and c.vocab_size == 300 and c.head_dim == 16


def test_parameter_count_matches_the_model():
    c = fbt.ModelConfig(hidden_size=32, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=2, intermediate_size=64)
    assert fbt.Model(c).num_parameters == c.parameter_count()


@pytest.mark.parametrize("make", [
    lambda d: fbt.ModelConfig.from_dict(d),
    lambda d: fbt.Model(d),
])
def test_a_nested_non_finite_option_is_a_value_error_naming_its_path(make):
    # before: json.dumps' own ValueError became a TypeError whose message carried Python's traceback
    for bad in (float("nan"), float("inf"), np.float64("nan")):
        with pytest.raises(ValueError) as e:
            make({"fuser": "gated_add", "fuser_options": {"alpha": bad}})
        msg = str(e.value)
        assert 'field "fuser_options.alpha" must be a finite number' in msg and "Traceback" not in msg and "\n" not in msg, msg
    c = fbt.ModelConfig()
    with pytest.raises(ValueError, match='field "alpha" must be a finite number'):
        c.fuser_options = {"alpha": float("nan")}
