"""The Hugging Face model with feedback (docs/interop.md): `fbt.export_hf` writes a directory that transformers
loads with AutoModelForCausalLM.from_pretrained(trust_remote_code=True) as FbtForCausalLM (python/fbt/hf), for the
v1 and paper presets, every built-in fuser, feedback tap and input norm, untied heads, per-layer sizes and a
sliding-window stack. Against fbt on the same weights: the logits of passes 1..3 within 2e-5 of the logit spread;
greedy decodes equal token for token for 64 tokens in standard, soft, fused(1) and fused(2); the K-pass
objective's gradients within 1e-4 of each tensor's largest; a 20-step PyTorch fine-tune is finite and falls, and
its weights, saved back as an fbt checkpoint, give fbt the fine-tuned model's logits. Skipped without torch and
transformers."""
import numpy as np
import pytest

import fbt
from conftest import TINY

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

BASE = dict(TINY, max_position_embeddings=256)
CONFIGS = {
    "v1_glu": dict(BASE),
    "paper": dict(BASE, input_norm="feedback_passes", gate_norm="shared", block_norm="sandwich"),
    "gated_add_pre_final_norm": dict(BASE, fuser="gated_add", fuser_options={"alpha": 0.5}, feedback_source="pre_final_norm"),
    "concat_layer_tap_fused_only_untied": dict(BASE, fuser="concat", input_norm="fused_only", feedback_source="layer",
                                               feedback_layer=0, tie_word_embeddings=False),
    "windowed_heterogeneous": dict(BASE, layer_types=["sliding_attention", "full_attention"], sliding_window=8,
                                   layer_intermediate_size=[64, 48], layer_num_attention_heads=[2, 4],
                                   layer_num_key_value_heads=[1, 2], doc_attention="causal"),
    "baseline_sandwich": dict(BASE, fuser="none", block_norm="sandwich"),
}
MODES = ["standard", "soft", "fused(1)", "fused(2)"]
TEXT = b"the quick brown fox jumps over the lazy dog"
PROMPT = "Once upon a"


def tokens():
    return [256] + list(TEXT[:20]) + [256] + list(TEXT[20:])


def randomised(cfg, seed):
    """A model of cfg whose weights are all perturbed, so that every tensor and the feedback matter."""
    m = fbt.Model(cfg, seed=seed)
    rng = np.random.default_rng(seed)
    for name, w in m.named_parameters().items():
        scale = 0.3 if name.startswith("model.feedback.") and w.ndim == 2 else 0.1 if w.ndim == 1 else 0.02
        w += rng.normal(0.0, scale, w.shape).astype(np.float32)
    return m


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def pair(request, tmp_path_factory):
    """(name, fbt model, the exported directory loaded by transformers)."""
    name = request.param
    m = randomised(CONFIGS[name], seed=len(name))
    d = tmp_path_factory.mktemp("hf_" + name)
    fbt.export_hf(m, str(d))
    hm = transformers.AutoModelForCausalLM.from_pretrained(str(d), trust_remote_code=True, dtype=torch.float32)
    return name, m, hm, d


def test_the_export_is_the_remote_code_model(pair):
    name, m, hm, d = pair
    assert type(hm).__name__ == "FbtForCausalLM"
    assert set(dict(hm.named_parameters())) == set(m.named_parameters()), "fbt's tensor names, nothing missing or extra"
    for k, w in m.named_parameters().items():
        assert np.array_equal(dict(hm.named_parameters())[k].detach().numpy(), w), k
    tok = transformers.AutoTokenizer.from_pretrained(str(d), trust_remote_code=True)
    assert tok("ab")["input_ids"] == [256, 97, 98] and tok.eos_token_id == 256 and hm.config.eos_token_id == 256
    assert fbt.Model.load(str(d)).config == m.config, "fbt reads the export back as itself"


def test_logits_of_every_pass_agree(pair):
    name, m, hm, _ = pair
    t = tokens()
    K = 3 if m.has_feedback else 1
    ref = m.logits(np.array(t, np.int32), passes=K)[:, 0]  # (K, T, V)
    with torch.no_grad():
        for k in range(1, K + 1):
            got = hm(torch.tensor([t]), passes=k).logits[0].double().numpy()
            a, b = ref[k - 1].astype(np.float64), got
            a, b = a - a.max(-1, keepdims=True), b - b.max(-1, keepdims=True)
            la = a - np.log(np.exp(a).sum(-1, keepdims=True))
            lb = b - np.log(np.exp(b).sum(-1, keepdims=True))
            spread = (ref[k - 1].max(-1) - ref[k - 1].min(-1)).max()
            err = np.abs(la - lb).max() / spread
            print(f"{name} pass {k}: logits differ by {err:.1e} of the spread")
            assert err < 2e-5, f"{name} pass {k}: log-softmax differs by {err:.2e} of the logit spread"


@pytest.mark.parametrize("mode", MODES)
def test_greedy_decodes_are_equal(pair, mode):
    name, m, hm, _ = pair
    if not m.has_feedback and mode != "standard":
        pytest.skip("a baseline decodes in standard mode only")
    ref = fbt.Decoder(m).generate(PROMPT, mode=mode, greedy=True, max_new_tokens=64)
    x = torch.tensor([[256] + list(PROMPT.encode())])
    got = hm.generate(x, max_new_tokens=64, do_sample=False, decode_mode=mode, eos_token_id=None)[0, x.shape[1]:]
    assert got.tolist() == ref.tolist(), f"{name} {mode}"


def test_gradients_agree(pair):
    name, m, hm, _ = pair
    t = np.array([tokens()], np.int32)
    K = 3 if m.has_feedback else 1
    m.zero_grad()
    fbt.multipass_step(m, t, K=K)
    hm.zero_grad()
    x = torch.tensor(t.astype(np.int64))
    hm(x, labels=x, passes=K).loss.backward()
    hg = {k: p.grad for k, p in hm.named_parameters()}
    worst = 0.0
    for k, g in m.named_grads().items():
        got = hg[k].numpy()
        scale = np.abs(g).max()
        assert scale > 0, f"{name}: {k} gets no gradient"
        err = np.abs(got - g).max() / scale
        worst = max(worst, err)
        assert err < 1e-4, f"{name}: gradient of {k} differs by {err:.2e} of its largest entry"
    print(f"{name}: gradients differ by at most {worst:.1e} of a tensor's largest entry")


def test_a_pytorch_fine_tune_learns_and_goes_back_to_fbt(pair, tmp_path):
    name, m, hm, _ = pair
    import copy
    ft_model = copy.deepcopy(hm)
    ft_model.train()
    K = 2 if m.has_feedback else 1
    x = torch.tensor([tokens(), tokens()[::-1]])
    opt = torch.optim.AdamW(ft_model.parameters(), lr=3e-3)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        out = ft_model(x, labels=x, passes=K, sigma=0.02)
        out.loss.backward()
        opt.step()
        losses.append(out.loss.item())
    assert all(np.isfinite(losses)) and losses[-1] < 0.8 * losses[0], losses
    ck = tmp_path / "finetuned.safetensors"
    ft_model.save(str(ck))
    back = fbt.Model.load(str(ck))
    ft_model.eval()
    with torch.no_grad():
        want = ft_model(x[:1], passes=K).logits[0].numpy()
    got = back.logits(np.array(x[0].tolist(), np.int32), passes=K)[K - 1, 0]
    assert np.abs(got - want).max() < 1e-4 * (want.max() - want.min()) + 1e-5


def test_a_peft_lora_fine_tune(tmp_path):
    """PEFT's LoRA on the attention and the fuser (when peft is installed): the K-pass loss falls, and the merged
    model, saved as an fbt checkpoint, gives fbt its logits."""
    peft = pytest.importorskip("peft")
    m = randomised(CONFIGS["paper"], seed=3)
    d = tmp_path / "hf"
    fbt.export_hf(m, str(d))
    hm = transformers.AutoModelForCausalLM.from_pretrained(str(d), trust_remote_code=True, dtype=torch.float32)
    pm = peft.get_peft_model(hm, peft.LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj", "w_u", "w_g"], task_type="CAUSAL_LM"))
    x = torch.tensor([tokens()])
    opt = torch.optim.AdamW([p for p in pm.parameters() if p.requires_grad], lr=2e-2)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        out = pm(input_ids=x, labels=x, passes=2)
        out.loss.backward()
        opt.step()
        losses.append(out.loss.item())
    assert losses[-1] < 0.95 * losses[0], losses
    merged = pm.merge_and_unload().eval()
    merged.save(str(tmp_path / "merged.safetensors"))
    with torch.no_grad():
        want = merged(x, passes=2).logits[0].numpy()
    got = fbt.Model.load(str(tmp_path / "merged.safetensors")).logits(np.array(tokens(), np.int32), passes=2)[1, 0]
    assert np.abs(got - want).max() < 1e-4 * (want.max() - want.min()) + 1e-5


def test_the_remote_codes_config_reads_windows_as_fbt_does():
    # issue 47: one set of window rules for every reader of a model config, the PyTorch one included
    from fbt.hf.fbt_torch import Config
    base = dict(fbt.ModelConfig(**{**BASE, "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8}).to_dict())
    assert Config.from_dict(base).sliding_window == 8
    for edit, says in [(dict(sliding_window=0), "sliding_window"), (dict(use_sliding_window=False), "use_sliding_window is false"),
                       (dict(layer_types=["full_attention"]), "layer_types: 1 entries"),
                       (dict(layer_types=["full_attention", "full_attention"]), "no layer is sliding_attention")]:
        with pytest.raises(ValueError, match=says):
            Config.from_dict({**base, **edit})
        with pytest.raises(ValueError):  # and fbt's own reader refuses the same dict
            fbt.ModelConfig.from_dict({**base, **edit})
    off = {**base, "use_sliding_window": False, "layer_types": ["full_attention", "full_attention"]}
    assert Config.from_dict(off).sliding_window == 0 and fbt.ModelConfig.from_dict(off).sliding_window == 0
