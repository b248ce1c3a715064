// The spec's invariants on the training forward (spec sections 5 and 9), in double unless stated:
//   - K = 1 is a plain transformer on N_in(e) (e under input_norm fused_only and feedback_passes); feedback
//     weights get no gradient
//   - gate_norm shared: the fuser's gate norm is N_in's gain (one tensor, the gradient of both uses)
//   - gated_add at init equals the plain model exactly; concat up to the norms' eps (bound derived below)
//   - tied embeddings receive the gradients of every use (embedding, gate, head)
//   - exactness (5.1): with sigma = 0 and prefix p, pass k at positions t <= p + k - 1 (1-indexed) equals
//     token-by-token decoding with true feedback (a naive sequential reference built here)
//   - documents (invariant 6): no state crosses a boundary; packed equals separate under masked attention
//   - the float forward agrees with the double forward (tolerances stated at the test)
// Exactness and documents are also checked with the state tapped at a middle layer and on a stack whose
// blocks differ in heads and MLP width.
#include <gtest/gtest.h>

#include <cmath>

#include "common/pass_runner.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_model_invariants {

using namespace fbt;
using namespace fbt_test;

namespace {

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b, std::size_t from = 0, std::size_t to = SIZE_MAX) {
  double d = 0;
  for (std::size_t i = from; i < std::min(to, a.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

/// Copies every tensor of dst that src has too (by name).
template <class A, class B> void copy_shared_params(A& dst, const B& src) {
  for (const auto& s : dst.params.specs()) {
    const auto* p = src.params.value(s.name);
    std::copy(p, p + s.size, dst.params.values() + s.offset);
  }
}

TEST(Invariant2, OnePassIsAPlainTransformerOnNinOfE) {
  for (const std::string in_norm : {"all", "fused_only", "feedback_passes"}) {
    ModelConfig cfg = tiny_config("glu");
    cfg.input_norm = in_norm;
    Model<double> fb(cfg, 1);
    randomize(fb, 2);
    ModelConfig bc = cfg;
    bc.fuser = "none";
    Model<double, NoFuser<double>> base(bc, 9);
    copy_shared_params(base, fb);
    TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 3);
    const Batch b = tb.batch();
    const int N = 12, D = cfg.hidden_size;

    Workspace<Model<double>> w;
    StepOptions o;
    fb.params.zero_grad();
    const double l_fb = multipass_step(fb, w, b, o).loss[0];
    // feedback weights get no gradient (in_norm does under "all": N_in(e) is part of the plain input)
    for (const char* name : {"model.feedback.w_u.weight", "model.feedback.w_g.weight", "model.feedback.gate_norm.weight"}) {
      const auto& s = fb.params.spec(name);
      for (std::size_t i = 0; i < s.size; ++i) ASSERT_EQ(fb.params.grads()[s.offset + i], 0.0) << name;
    }
    // ... and change nothing
    fb.params.value("model.feedback.w_u.weight")[3] += 1.0;
    fb.params.value("model.feedback.w_g.weight")[5] -= 2.0;
    EXPECT_EQ(multipass_step(fb, w, b, o).loss[0], l_fb);

    // the baseline decoder fed X = N_in(e) (computed here from its formula) gives the same loss
    using Base = Model<double, NoFuser<double>>;
    CpuBackend<double> be;
    Workspace<Base> wb;
    PassRunner<Base> run(be, base, base.weights(), wb);
    run.prepare(2, 6, 1, false);
    run.begin_batch(b.tokens, nullptr, b.targets);
    auto& p = wb.pass[0];
    const double* g = fb.params.value("model.feedback.in_norm.weight");
    for (int n = 0; n < N; ++n) {
      double ms = 0;
      for (int c = 0; c < D; ++c) ms += wb.e[n * D + c] * wb.e[n * D + c];
      const double r = 1.0 / std::sqrt(ms / D + cfg.rms_norm_eps);
      for (int c = 0; c < D; ++c) p.res[0][n * D + c] = in_norm == "all" ? wb.e[n * D + c] * r * g[c] : wb.e[n * D + c];
    }
    run.stack_forward(p);
    const auto sc = run.head_forward(p, 0.0);
    EXPECT_NEAR(sc.first / sc.second, l_fb, 1e-13) << in_norm;
    Workspace<Base> wb2;
    if (in_norm != "all") EXPECT_EQ(multipass_step(base, wb2, b, o).loss[0], l_fb) << in_norm << ": exactly the baseline";
  }
}

/// A GLU fuser whose gate norm has another name: it has no gate_norm.weight for gate_norm shared to take.
struct NoGateFuser : GluFuser<double> {
  static constexpr const char* name = "nogate";
  using GluFuser<double>::GluFuser;
  void declare(const ParamRegistry<double>& r) {
    w_u = r.add("w_u.weight", {D, D}, Init::Identity);
    w_g = r.add("w_g.weight", {D, D}, Init::Normal, 0.01);
    gate_norm.declare(r.scope("own_norm"));
  }
};

// gate_norm shared (spec 10: one input_rmsnorm_1): no gate_norm.weight tensor; the fuser's gate-side norm
// reads N_in's gain, so changing that gain changes the gate, and its gradient is the sum of both uses
// (the gradient check of tests/model/test_model_gradcheck.cpp "papernorms" covers the sum's value).
TEST(GateNorm, SharedIsNinsGain) {
  for (const std::string fuser : {"glu", "gated_add", "concat"}) {
    ModelConfig cfg = tiny_config(fuser), sep = cfg;
    cfg.gate_norm = "shared";
    with_model<double>(cfg, [&](auto tag) {
      using M = typename decltype(tag)::type;
      M m(cfg, 1), ms(sep, 1);
      EXPECT_FALSE(m.params.has("model.feedback.gate_norm.weight")) << fuser;
      EXPECT_TRUE(ms.params.has("model.feedback.gate_norm.weight")) << fuser;
      EXPECT_EQ(m.params.size() + std::size_t(cfg.hidden_size), ms.params.size()) << fuser;
      // the fuser's gate norm reads N_in's gain (the same offset)
      const auto& f = m.fuser();
      const std::size_t g = f.template get_if<GluFuser<double>>()         ? f.template get_if<GluFuser<double>>()->gate_norm.g
                            : f.template get_if<GatedAddFuser<double>>() ? f.template get_if<GatedAddFuser<double>>()->gate_norm.g
                                                                         : f.template get_if<ConcatFuser<double>>()->gate_norm.g;
      EXPECT_EQ(g, m.input().in_norm.g) << fuser;
      EXPECT_EQ(cfg.parameter_count(), std::uint64_t(m.params.size())) << fuser;
    });
  }
  // a fuser that declares no gate norm is refused under shared, naming the knob
  ModelConfig c = tiny_config("glu");
  using M = Model<double, NoGateFuser>;
  EXPECT_NO_THROW(M(Embedding<double>(11, 8, 0.02), {DecoderBlock<double>(layer_spec(c, 0))}, NoGateFuser(fuser_args(c)), model_options(c)));
  c.gate_norm = "shared";
  try {
    M(Embedding<double>(11, 8, 0.02), {DecoderBlock<double>(layer_spec(c, 0))}, NoGateFuser(fuser_args(c)), model_options(c));
    ADD_FAILURE() << "no refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gate_norm \"shared\""), std::string::npos) << e.what();
  }
}

// in_norm_init embedding: N_in's gain starts at initializer_range, so a fused input has the raw
// embeddings' rms at init instead of ~1.
TEST(InNormInit, EmbeddingScaleStartsTheGainAtTheInitStd) {
  ModelConfig cfg = tiny_config("glu");
  cfg.in_norm_init = "embedding", cfg.initializer_range = 0.05;
  Model<double> m(cfg, 1);
  const double* g = m.params.value("model.feedback.in_norm.weight");
  for (int c = 0; c < cfg.hidden_size; ++c) EXPECT_EQ(g[c], 0.05);
  EXPECT_EQ(describe_model(m).in_norm_init, "embedding");
}

TEST(FuserInit, GatedAddAtInitEqualsThePlainModelExactly) {
  ModelConfig cfg = tiny_config("gated_add");
  Model<double, GatedAddFuser<double>> m(cfg, 3);  // fresh init: W_s = 0
  TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 4);
  const PassRun r = run_passes(m, tb.batch(), 3);
  EXPECT_EQ(r.hf[1], r.hf[0]);
  EXPECT_EQ(r.hf[2], r.hf[0]);
  EXPECT_EQ(r.loss[2], r.loss[0]);
}

TEST(FuserInit, ConcatAtInitEqualsThePlainModelUpToTheNormsEps) {
  // concat at init gives N_in(N_g(e)) where the plain model has N_in(e). Both point along e; they differ
  // only through eps: N_in(e) = e / sqrt(ms + eps), N_in(N_g(e)) = e / sqrt(ms + eps (ms + eps)), so the
  // relative difference per row is at most eps / (2 ms) (ms = mean square of e's row).
  for (double eps : {1e-6, 1e-12}) {
    ModelConfig cfg = tiny_config("concat");
    cfg.rms_norm_eps = eps;
    Model<double, ConcatFuser<double>> m(cfg, 3);
    TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 4);
    const Batch b = tb.batch();
    const PassRun r = run_passes(m, b, 2);
    const int D = cfg.hidden_size;
    double worst = 0, seen = 0;
    for (int n = 0; n < 12; ++n) {
      const int t = n % 6;
      if (t == 0) continue;  // position 0 is plain in every pass
      const double* e = m.params.value("model.embed_tokens.weight") + std::size_t(tb.tokens[n]) * D;
      double ms = 0;
      for (int c = 0; c < D; ++c) ms += e[c] * e[c] / D;
      double num = 0, den = 0;
      for (int c = 0; c < D; ++c) {
        num = std::max(num, std::abs(r.x0[1][n * D + c] - r.x0[0][n * D + c]));
        den = std::max(den, std::abs(r.x0[0][n * D + c]));
      }
      worst = std::max(worst, (num / den) / (eps / (2 * ms)));
      seen = std::max(seen, num / den);
    }
    EXPECT_LE(worst, 1.01) << "difference must stay within the eps bound";
    if (eps == 1e-6) EXPECT_GT(seen, 1e-6) << "the difference is real at eps 1e-6 (not hidden)";
    if (eps == 1e-12) EXPECT_LT(seen, 1e-8);
  }
}

TEST(TiedEmbedding, ReceivesTheGradientOfEveryUse) {
  // tied dE == untied d(embed) + d(lm_head) when lm_head == embed: embedding lookups of every pass,
  // the fuser's gate N_g(e), and the head all reach E.
  ModelConfig cfg = tiny_config("glu");
  Model<double> tied(cfg, 1);
  randomize(tied, 2);
  ModelConfig uc = cfg;
  uc.tie_word_embeddings = false;
  Model<double> untied(uc, 1);
  for (const auto& s : tied.params.specs()) std::copy(tied.params.value(s.name), tied.params.value(s.name) + s.size, untied.params.value(s.name));
  const auto& es = tied.params.spec("model.embed_tokens.weight");
  std::copy(tied.params.value(es.name), tied.params.value(es.name) + es.size, untied.params.value("lm_head.weight"));
  TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 3);
  StepOptions o;
  o.K = 3;
  Workspace<Model<double>> w1, w2;
  tied.params.zero_grad(), untied.params.zero_grad();
  const double l1 = multipass_step(tied, w1, tb.batch(), o).objective;
  const double l2 = multipass_step(untied, w2, tb.batch(), o).objective;
  EXPECT_NEAR(l1, l2, 1e-13);
  const double* gt = tied.params.grad("model.embed_tokens.weight");
  const double* ge = untied.params.grad("model.embed_tokens.weight");
  const double* gh = untied.params.grad("lm_head.weight");
  double d = 0, head = 0, emb = 0;
  for (std::size_t i = 0; i < es.size; ++i) d = std::max(d, std::abs(gt[i] - (ge[i] + gh[i]))), head += gh[i] * gh[i], emb += ge[i] * ge[i];
  EXPECT_LT(d, 1e-13);
  EXPECT_GT(head, 1e-8);
  EXPECT_GT(emb, 1e-8);
}

/// The configurations the exactness and document invariants run on: each fuser; the state tapped at a
/// middle layer and at the last residual; a stack whose blocks differ in heads and MLP width.
std::vector<std::pair<std::string, ModelConfig>> shape_cases() {
  std::vector<std::pair<std::string, ModelConfig>> v;
  for (const std::string fuser : {"glu", "gated_add", "concat"}) v.push_back({fuser, tiny_config(fuser)});
  ModelConfig c = tiny_config("glu");
  c.num_hidden_layers = 3, c.feedback_source = "layer", c.feedback_layer = 1;
  v.push_back({"glu tap layer 1 of 3", c});
  c = tiny_config("glu");
  c.feedback_source = "pre_final_norm";
  v.push_back({"glu tap pre_final_norm", c});
  c = tiny_config("glu");
  c.num_hidden_layers = 3, c.layer_num_attention_heads = {2, 4, 2}, c.layer_num_key_value_heads = {1, 2, 2}, c.layer_intermediate_size = {12, 20, 6};
  c.head_dim = 4;
  v.push_back({"glu heterogeneous", c});
  return v;
}

TEST(Invariant1, PassKIsExactUpToPrefixPlusKMinusOne) {
  for (const auto& [what, cfg] : shape_cases())
    with_model<double>(cfg, [&, what = what, cfg = cfg](auto tag) {
      typename decltype(tag)::type m(cfg, 11);
      randomize(m, 12);
      const int B = 2, Tn = 9, D = cfg.hidden_size;
      TinyBatch tb = tiny_batch(B, Tn, cfg.vocab_size, 13);
      const Batch b = tb.batch();
      const std::vector<int> p_row{2, 0};
      const std::vector<double> seq = sequential_states(m, b, p_row);
      const int K = 4;
      std::vector<int> prefix(std::size_t(K) * B);
      for (int j = 0; j < K; ++j) prefix[j * B] = p_row[0], prefix[j * B + 1] = p_row[1];
      const PassRun r = run_passes(m, b, K, &prefix);
      for (int k = 1; k <= K; ++k)
        for (int i = 0; i < B; ++i) {
          // 1-indexed: exact at t <= p + k - 1 (spec); position 1 is always plain, so with p = 0 it holds to k
          const int last = std::max(p_row[i], 1) + k - 1;
          for (int t1 = 1; t1 <= Tn; ++t1) {
            const std::size_t n = std::size_t(i) * Tn + (t1 - 1);
            const double d = max_abs_diff(r.hf[k - 1], seq, n * D, (n + 1) * D);
            if (t1 <= last) EXPECT_LT(d, 1e-12) << what << " pass " << k << " row " << i << " t " << t1;
            // one position later the pass has not converged yet (shows the reference can tell them apart)
            if (t1 == last + 1) EXPECT_GT(d, 1e-6) << what << " pass " << k << " row " << i << " t " << t1;
          }
        }
    });
}

template <class M> void documents_case(const std::string& what, const ModelConfig& cfg) {
  SCOPED_TRACE(what);
  M m(cfg, 21);
  randomize(m, 22);
  const int D = cfg.hidden_size, la = 4, lb = 5, Tn = la + lb;
  TinyBatch packed = tiny_batch(1, Tn, cfg.vocab_size, 23);
  packed.doc_start[la] = 1;
  TinyBatch a = tiny_batch(1, la, cfg.vocab_size, 0), bb = tiny_batch(1, lb, cfg.vocab_size, 0);
  std::copy(packed.tokens.begin(), packed.tokens.begin() + la, a.tokens.begin());
  std::copy(packed.tokens.begin() + la, packed.tokens.end(), bb.tokens.begin());
  std::copy(packed.targets.begin(), packed.targets.begin() + la, a.targets.begin());
  std::copy(packed.targets.begin() + la, packed.targets.end(), bb.targets.begin());
  const int K = 3;
  const PassRun rp = run_passes(m, packed.batch(true), K), ra = run_passes(m, a.batch(), K), rb = run_passes(m, bb.batch(), K);
  for (int k = 0; k < K; ++k) {
    EXPECT_LT(max_abs_diff(std::vector<double>(rp.hf[k].begin(), rp.hf[k].begin() + la * D), ra.hf[k]), 1e-12) << "pass " << k + 1;
    EXPECT_LT(max_abs_diff(std::vector<double>(rp.hf[k].begin() + la * D, rp.hf[k].end()), rb.hf[k]), 1e-12) << "pass " << k + 1;
    // the document's first position is plain in every pass: its layer-0 input is pass 1's
    EXPECT_EQ(std::vector<double>(rp.x0[k].begin() + la * D, rp.x0[k].begin() + (la + 1) * D),
              std::vector<double>(rp.x0[0].begin() + la * D, rp.x0[0].begin() + (la + 1) * D));
  }
  // without the boundary the second document's first position is fed back and differs
  const PassRun ru = run_passes(m, packed.batch(false), K);
  EXPECT_GT(max_abs_diff(std::vector<double>(ru.hf[1].begin() + la * D, ru.hf[1].end()), rb.hf[1]), 1e-6);
  // doc_attention "causal": attention crosses the boundary but the feedback still does not
  ModelConfig cc = cfg;
  cc.doc_attention = "causal";
  M mc(cc, 21);
  randomize(mc, 22);
  const PassRun rc = run_passes(mc, packed.batch(true), K);
  for (int k = 0; k < K; ++k)
    EXPECT_EQ(std::vector<double>(rc.x0[k].begin() + la * D, rc.x0[k].begin() + (la + 1) * D),
              std::vector<double>(rc.x0[0].begin() + la * D, rc.x0[0].begin() + (la + 1) * D));
}

TEST(Invariant6, NoStateCrossesADocumentAndPackedEqualsSeparate) {
  for (const auto& [what, cfg] : shape_cases())
    with_model<double>(cfg, [&, what = what, cfg = cfg](auto tag) { documents_case<typename decltype(tag)::type>(what, cfg); });
}

TEST(FloatForward, AgreesWithDouble) {
  // Same seed: the float model holds the double init rounded to float. Tolerances: per-pass loss
  // relative 1e-5; final-norm states (O(1) entries) max abs 1e-4; both ~100x the observed float error.
  for (const std::string fuser : {"none", "glu", "gated_add", "concat"}) {
    ModelConfig cfg = tiny_config(fuser);
    cfg.hidden_size = 32, cfg.intermediate_size = 64, cfg.num_attention_heads = 4, cfg.num_key_value_heads = 2;
    PassRun rd, rf;
    const int K = fuser == "none" ? 1 : 3;
    TinyBatch tb = tiny_batch(2, 16, cfg.vocab_size, 7);
    with_model<double>(cfg, [&](auto td) {
      with_model<float>(cfg, [&](auto tf) {
        typename decltype(td)::type md(cfg, 5);
        typename decltype(tf)::type mf(cfg, 5);
        randomize(md, 6);
        for (std::size_t i = 0; i < md.params.size(); ++i) mf.params.values()[i] = float(md.params.values()[i]);
        rd = run_passes(md, tb.batch(), K), rf = run_passes(mf, tb.batch(), K);
      });
    });
    for (int k = 0; k < K; ++k) {
      EXPECT_LT(std::abs(rf.loss[k] - rd.loss[k]) / rd.loss[k], 1e-5) << fuser << " pass " << k + 1;
      EXPECT_LT(max_abs_diff(rf.hf[k], rd.hf[k]), 1e-4) << fuser << " pass " << k + 1;
    }
  }
}

}  // namespace

}  // namespace test_model_invariants
