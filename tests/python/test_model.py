"""fbt.Model: construction, checkpoints (fbt and Hugging Face), logits equal to `fbt logits` bit for bit and
handed over without a copy, hidden states at every depth, parameters as views of the model's memory."""
import numpy as np
import pytest

import fbt
from conftest import TINY, ids, run_cli

TEXT = "the quick brown fox"


def test_construct_and_describe(tiny_model):
    m = tiny_model
    assert (m.vocab_size, m.hidden_size, m.num_layers, m.has_feedback) == (257, 32, 2, True)
    assert m.config.fuser == "glu" and m.num_parameters == m.config.parameter_count()
    assert "fbt.Model(fuser=glu" in repr(m)


def test_config_may_be_a_dict_and_seed_decides_the_weights():
    a, b, c = fbt.Model(TINY, seed=1), fbt.Model(fbt.ModelConfig(**TINY), seed=1), fbt.Model(TINY, seed=2)
    la, lb, lc = (x.logits("abc") for x in (a, b, c))
    assert np.array_equal(la, lb) and not np.array_equal(la, lc)


def test_every_builtin_fuser_builds(tiny_config):
    for fuser in ("none", "glu", "gated_add", "concat"):
        m = fbt.Model(dict(TINY, fuser=fuser), seed=3)
        assert m.config.fuser == fuser and m.has_feedback == (fuser != "none")
        assert m.logits("ab").shape == ((3 if fuser != "none" else 1), 1, 3, 257)


def test_logits_shape_dtype_and_zero_copy(tiny_model):
    lg = tiny_model.logits(TEXT, passes=2)
    assert lg.shape == (2, 1, len(TEXT) + 1, 257) and lg.dtype == np.float32
    assert lg.flags.c_contiguous and lg.flags.writeable
    # the array does not own its memory: numpy wraps the library's result buffer, which the array's base keeps alive
    assert not lg.flags.owndata and lg.base is not None
    assert not isinstance(lg.base, np.ndarray)
    lg2 = tiny_model.logits(TEXT, passes=2)
    assert np.array_equal(lg, lg2) and not np.shares_memory(lg, lg2)


def test_logits_equal_fbt_logits_bit_for_bit(tiny_model, work_dir):
    ck = work_dir / "ck"
    tiny_model.save(str(ck))
    out = work_dir / "lg.npy"
    run_cli("logits", "--checkpoint", ck, "--text", TEXT, "--passes", 3, "--out", out)
    ref = np.load(out)                                  # (K, T, V)
    toks = np.load(str(out)[:-4] + ".tokens.npy")       # (T)
    lg = tiny_model.logits(TEXT, passes=3)
    assert np.array_equal(toks, np.frombuffer(b"\x00" + TEXT.encode(), np.uint8).astype(np.int32) + np.r_[256, np.zeros(len(TEXT), int)])
    assert lg.shape[0] == ref.shape[0] and np.array_equal(lg[:, 0], ref), "max |diff| %g" % np.abs(lg[:, 0] - ref).max()
    # and the same model loaded back from the checkpoint
    assert np.array_equal(fbt.Model.load(str(ck)).logits(TEXT, passes=3), lg)


def test_token_forms_agree(tiny_model):
    t = np.array([256] + list(TEXT.encode()), dtype=np.int32)
    ref = tiny_model.logits(t)
    for form in (TEXT, TEXT.encode(), t.tolist(), t.astype(np.int64), t.astype(np.uint16), t[None, :]):
        assert np.array_equal(tiny_model.logits(form), ref)


def test_torch_tensor_through_dlpack(tiny_model):
    torch = pytest.importorskip("torch")
    t = np.array([256] + list(TEXT.encode()), dtype=np.int32)
    assert np.array_equal(tiny_model.logits(torch.from_numpy(t)), tiny_model.logits(t))
    assert np.array_equal(tiny_model.logits(torch.from_numpy(t).long()), tiny_model.logits(t))


def test_batch_rows_equal_single_rows(tiny_model):
    rows = np.array([[256, 1, 2, 3, 4, 5], [256, 9, 8, 7, 6, 5]], dtype=np.int32)
    both = tiny_model.logits(rows, passes=3)
    for r in range(2):
        one = tiny_model.logits(rows[r], passes=3)[:, 0]
        np.testing.assert_allclose(both[:, r], one, rtol=1e-5, atol=1e-5)


def test_doc_starts(tiny_model):
    t = ids(256, 1, 2, 3, 4, 5, 6)
    default = tiny_model.logits(t)
    explicit = tiny_model.logits(t, doc_starts=np.array([1, 0, 0, 0, 0, 0, 0], bool))
    assert np.array_equal(default, explicit)
    split = tiny_model.logits(t, doc_starts=[1, 0, 0, 1, 0, 0, 0])
    assert np.array_equal(split[:, :, :3], default[:, :, :3]) and not np.array_equal(split[:, :, 3:], default[:, :, 3:])
    with pytest.raises(ValueError, match="doc_starts"):
        tiny_model.logits(t, doc_starts=[0, 0, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="doc_starts"):
        tiny_model.logits(t, doc_starts=[1, 0])


def test_hidden_states_every_depth(tiny_model):
    m = tiny_model
    hs = m.hidden_states(TEXT, passes=2)
    L, T = m.num_layers, len(TEXT) + 1
    assert hs.shape == (L + 2, 1, T, 32) and hs.dtype == np.float32 and not hs.flags.owndata
    # the final norm's output times the (tied) embedding is pass 2's logits
    emb = m.named_parameters()["model.embed_tokens.weight"]
    np.testing.assert_allclose(hs[L + 1, 0] @ emb.T, m.logits(TEXT, passes=2)[1, 0], rtol=1e-4, atol=1e-5)
    # depths chosen, negative from the end
    sel = m.hidden_states(TEXT, passes=2, layers=[0, -1])
    assert np.array_equal(sel[0], hs[0]) and np.array_equal(sel[1], hs[L + 1])
    # pass 1 differs from pass 2 after the first position (the fed-back state)
    p1 = m.hidden_states(TEXT, passes=1, layers=[0])
    assert np.array_equal(p1[0, 0, 0], hs[0, 0, 0]) and not np.array_equal(p1[0, 0, 1:], hs[0, 0, 1:])
    with pytest.raises(ValueError, match="layers"):
        m.hidden_states(TEXT, layers=[L + 2])


def test_named_parameters_are_views(work_dir):
    m = fbt.Model(TINY, seed=5)
    p = m.named_parameters()
    w = p["model.norm.weight"]
    assert w.shape == (32,) and np.shares_memory(w, m.named_parameters()["model.norm.weight"])
    before = m.logits("abc")
    w *= 2.0  # writes the model's own weights
    after = m.logits("abc")
    assert not np.array_equal(before, after)
    m.save(str(work_dir / "m.safetensors"))
    assert np.array_equal(fbt.Model.load(str(work_dir / "m.safetensors")).named_parameters()["model.norm.weight"], w)


def test_huggingface_directory(work_dir):
    base = fbt.Model(dict(TINY, fuser="none"), seed=11)
    ck = work_dir / "base"
    base.save(str(ck))
    hf = work_dir / "hf"
    run_cli("export", "--checkpoint", ck, "--hf", hf)
    m = fbt.Model.load(str(hf))
    assert m.config.fuser == "none" and np.array_equal(m.logits("hello"), base.logits("hello"))


def test_load_refusals(work_dir):
    with pytest.raises(ValueError, match="does not exist"):
        fbt.Model.load(str(work_dir / "missing"))
    (work_dir / "junk.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(ValueError):
        fbt.Model.load(str(work_dir / "junk.safetensors"))


def test_passes_refusals(tiny_model):
    with pytest.raises(ValueError, match="passes"):
        tiny_model.logits("ab", passes=0)
    with pytest.raises(ValueError, match="passes"):
        fbt.Model(dict(TINY, fuser="none")).logits("ab", passes=2)


def test_prefix_keeps_positions_plain(tiny_model):
    t = np.array([256] + list(b"abcdefgh"), np.int32)
    none = tiny_model.logits(t, passes=3)
    assert np.array_equal(tiny_model.logits(t, passes=3, prefix=0), none)
    p4 = tiny_model.logits(t, passes=3, prefix=4)
    # positions t < 4 read only plain inputs in every pass: pass 1's logits there; later positions are fed back
    for k in range(3):
        np.testing.assert_array_equal(p4[k, 0, :4], none[0, 0, :4])
    assert not np.array_equal(p4[2, 0, 4:], p4[0, 0, 4:])
    rows = np.stack([t, t])
    both = tiny_model.logits(rows, passes=3, prefix=[0, 4])
    np.testing.assert_allclose(both[:, 0], none[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(both[:, 1], p4[:, 0], rtol=1e-5, atol=1e-6)
    hs = tiny_model.hidden_states(t, passes=3, layers=[0], prefix=4)
    assert np.array_equal(hs[0, 0, :4], tiny_model.hidden_states(t, passes=1, layers=[0])[0, 0, :4])
    for bad, err in ((-1, ValueError), (10, ValueError), ([1, 2], ValueError), (1.5, TypeError), ("x", TypeError)):
        with pytest.raises(err, match="prefix"):
            tiny_model.logits(t, prefix=bad)


def test_copy_and_pickle_give_an_independent_equal_model(tiny_model):
    import copy
    import pickle

    x = "hello"
    want = tiny_model.logits(x, passes=2).copy()
    for other in (copy.copy(tiny_model), copy.deepcopy(tiny_model), pickle.loads(pickle.dumps(tiny_model))):
        assert other.config.to_dict() == tiny_model.config.to_dict()
        np.testing.assert_array_equal(other.logits(x, passes=2), want)  # bit for bit
        p = other.named_parameters()["model.embed_tokens.weight"]
        p += 1.0  # the copy's own memory: the original is untouched
        np.testing.assert_array_equal(tiny_model.logits(x, passes=2), want)
    state = tiny_model.__getstate__()
    with pytest.raises(ValueError, match="bytes of parameters"):
        fbt.Model.__new__(fbt.Model).__setstate__((state[0], state[1][:-4]))


def test_export_hf_is_the_commands_export(tiny_model, tmp_path):
    d = tmp_path / "hf"
    fbt.export_hf(tiny_model, str(d))
    assert (d / "config.json").exists() and (d / "model.safetensors").exists()
    back = fbt.Model.load(str(d))
    np.testing.assert_array_equal(back.logits("hello", passes=2), tiny_model.logits("hello", passes=2))
    plain = tmp_path / "plain"
    fbt.export_hf(tiny_model, str(plain), plain=True, dtype="BF16")
    assert fbt.Model.load(str(plain)).has_feedback is False
    with pytest.raises(ValueError, match="expected F32 or BF16"):
        fbt.export_hf(tiny_model, str(tmp_path / "x"), dtype="F16")
