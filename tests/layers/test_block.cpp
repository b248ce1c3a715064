// tests/layers/test_block.cpp: DecoderBlock = PreNormBlock<CausalSelfAttention, SwiGLU> (fbt/layers/block.hpp), mid = x + Attn(RMSNorm_1(x)),
// out = mid + SwiGLU(RMSNorm_2(mid)).
//
// Setup: D 8, NH 4, NKV 2, head_dim 4 (NH*hs = 16 != D), F 12, B 2, T 5; parameters moved away from init (gains
// 1 + N(0, 0.2^2), matrices N(0, 0.3^2)); QK-norm on and off; rows with and without documents.
// Checks:
// - forward equals the composition written with rmsnorm_forward and the block's own attention / MLP
//   layers on separate caches (1e-13 of the output scale), and overwrites (does not accumulate into) out;
// - backward (in place: dx holds d out on entry, d x on exit) w.r.t. x and every parameter tensor, then
//   the whole store, against central finite differences of f = sum w * out in double: normwise rel err
//   < 1e-6 and non-zero gradients;
// - parameter gradients accumulate (two backward calls double them);
// - float forward agrees with double to 1e-5 of the output scale;
// - the KV-cached decoding step (decode) of the last position equals the forward's last row (1e-13), with
//   the cache filled from the forward's keys and values (kv), for two sequences stepped together;
// - blocks of one stack may differ: a block built from its own LayerSpec with other heads and MLP width
//   reports that spec back (layer_spec) and declares tensors of those shapes;
// - block_norm sandwich (the paper's norms around each residual branch): every check above also runs with
//   it, the composition then mid = x + RMSNorm_a(attn(RMSNorm_1(x))), out = mid + RMSNorm_m(mlp(RMSNorm_2(mid))),
//   and it declares attn_output_layernorm.weight and mlp_output_layernorm.weight.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/layers/block.hpp"
#include "fbt/model/builder.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_block {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 2, Tn = 5, D = 8;

ModelConfig block_config(bool qk_norm, bool sandwich = false) {
  ModelConfig c;
  c.block_norm = sandwich ? "sandwich" : "pre";
  c.hidden_size = D, c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 4, c.intermediate_size = 12;
  c.num_hidden_layers = 2, c.max_position_embeddings = 16, c.rope_theta = 100.0, c.qk_norm = qk_norm;
  c.validate();
  return c;
}

template <class T> struct Rig : LayerRig<DecoderBlock<T>> {
  Rig(const ModelConfig& cfg, PassTables tb) : LayerRig<DecoderBlock<T>>(DecoderBlock<T>(layer_spec(cfg, 0)), "model.layers.0.", B, Tn, std::move(tb)) {}
  static constexpr int N = B * Tn;
  std::vector<T> forward(const T* x) {
    std::vector<T> out(std::size_t(N) * D, T(7));  // stale contents: forward must overwrite
    this->layer.forward(this->be, this->w(), this->cache, x, out.data(), this->shape());
    return out;
  }
  void backward(T* dx, const T* x) { this->layer.backward(this->be, this->w(), this->cache, dx, x, this->shape()); }
};

struct Case {
  bool qk_norm;
  bool docs;
  bool sandwich = false;
};
std::string name_of(const Case& c) { return std::string(c.qk_norm ? "qknorm" : "noqknorm") + (c.docs ? "_docs" : "") + (c.sandwich ? "_sandwich" : ""); }
void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }
PassTables tables(bool docs) { return docs ? pass_tables(B, Tn, {{2}, {3}}) : pass_tables(B, Tn); }

class BlockTest : public ::testing::TestWithParam<Case> {};

TEST_P(BlockTest, ForwardIsPreNormResidualComposition) {
  const Case c = GetParam();
  const ModelConfig cfg = block_config(c.qk_norm, c.sandwich);
  Rig<double> r(cfg, tables(c.docs));
  randomize_store(r.ps, 1);
  const auto x = randn_vec(std::size_t(r.N) * D, 2);
  const auto out = r.forward(x.data());

  // the same block by hand, from its attention and MLP layers on fresh caches
  const int N = r.N;
  LayerRig<CausalSelfAttention<double>> ra(r.layer.attn, "", B, Tn, r.tabs);
  LayerRig<SwiGLU<double>> rm(r.layer.mlp, "", B, Tn, r.tabs);
  const Weights<double> w = r.w();  // the block's store: the sub-layers keep its offsets
  std::vector<double> ln(N * D), rs(N), mid = x, ref;
  rmsnorm_forward(smat(ln.data(), N, D), vec(rs.data(), N), csmat(x.data(), N, D),
                  cvec(r.ps.value("model.layers.0.input_layernorm.weight"), D), cfg.rms_norm_eps);
  // sandwich: a branch's output is normalised (its own gain) before it is added to the residual
  auto add_branch = [&](std::vector<double>& res, const std::vector<double>& br, const char* out_norm) {
    if (!c.sandwich) {
      for (std::size_t i = 0; i < res.size(); ++i) res[i] += br[i];
      return;
    }
    std::vector<double> nb(br.size()), rb(N);
    rmsnorm_forward(smat(nb.data(), N, D), vec(rb.data(), N), csmat(br.data(), N, D),
                    cvec(r.ps.value(std::string("model.layers.0.") + out_norm + ".weight"), D), cfg.rms_norm_eps);
    for (std::size_t i = 0; i < res.size(); ++i) res[i] += nb[i];
  };
  std::vector<double> br(std::size_t(N) * D, 0.0);
  r.layer.attn.forward(r.be, w, ra.cache, ln.data(), br.data(), r.shape());  // br = attn(ln1)
  add_branch(mid, br, "attn_output_layernorm");                               // mid = x + [N_a] br
  ref = mid;
  rmsnorm_forward(smat(ln.data(), N, D), vec(rs.data(), N), csmat(mid.data(), N, D),
                  cvec(r.ps.value("model.layers.0.post_attention_layernorm.weight"), D), cfg.rms_norm_eps);
  std::fill(br.begin(), br.end(), 0.0);
  r.layer.mlp.forward(r.be, w, rm.cache, ln.data(), br.data(), r.shape());  // br = mlp(ln2)
  add_branch(ref, br, "mlp_output_layernorm");                              // out = mid + [N_m] br
  EXPECT_LT(max_scaled_diff(out, ref), 1e-13);
  EXPECT_LT(max_scaled_diff(r.cache.mid, mid.data(), mid.size()), 1e-13);
}

TEST_P(BlockTest, BackwardMatchesFiniteDifference) {
  const Case c = GetParam();
  Rig<double> r(block_config(c.qk_norm, c.sandwich), tables(c.docs));
  randomize_store(r.ps, 3);
  auto x = randn_vec(std::size_t(r.N) * D, 4);
  const auto w = random_weights(std::size_t(r.N) * D, 5);
  r.ps.zero_grad();
  r.forward(x.data());
  std::vector<double> dx = w;  // in place: d out on entry
  r.backward(dx.data(), x.data());
  const std::vector<double> grad(r.ps.grads(), r.ps.grads() + r.ps.size());
  auto f = [&]() { return dot(w, r.forward(x.data()).data()); };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "block dx " + name_of(c));
  expect_store_grads(r.ps, grad, f, "block " + name_of(c));

  // parameter grads accumulate: a second backward (fresh d out, same cache) doubles them, and the
  // in-place dx is the same as the first time
  r.forward(x.data());
  std::vector<double> dx2 = w;
  r.backward(dx2.data(), x.data());
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx2[i], dx[i], 1e-13);
  for (std::size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(r.ps.grads()[i], 2 * grad[i], 1e-12);
}

TEST_P(BlockTest, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale
  const Case c = GetParam();
  Rig<double> rd(block_config(c.qk_norm, c.sandwich), tables(c.docs));
  Rig<float> rf(block_config(c.qk_norm, c.sandwich), tables(c.docs));
  randomize_store(rd.ps, 6);
  copy_values(rf.ps, rd.ps);
  const auto x = randn_vec(std::size_t(rd.N) * D, 7);
  const auto xf = cast_vec<float>(x);
  const double d = max_scaled_diff(rf.forward(xf.data()), rd.forward(x.data()));
  std::printf("  block %s float vs double: %.3g\n", name_of(c).c_str(), d);
  EXPECT_LT(d, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cases, BlockTest,
                         ::testing::Values(Case{true, false}, Case{false, false}, Case{true, true}, Case{true, false, true}, Case{false, true, true}),
                         [](const ::testing::TestParamInfo<Case>& i) { return name_of(i.param); });

TEST(BlockSetup, ParameterNames) {
  Rig<double> r(block_config(true), tables(false));
  for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                        "self_attn.v_proj.weight", "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                        "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
    EXPECT_TRUE(r.ps.has(std::string("model.layers.0.") + n)) << n;
  EXPECT_EQ(r.ps.specs().size(), 11u);
  Rig<double> rs(block_config(true, true), tables(false));
  EXPECT_TRUE(rs.ps.has("model.layers.0.attn_output_layernorm.weight"));
  EXPECT_TRUE(rs.ps.has("model.layers.0.mlp_output_layernorm.weight"));
  EXPECT_EQ(rs.ps.specs().size(), 13u);
  EXPECT_TRUE(rs.layer.layer_spec().sandwich);
}

// Decoding: each of two sequences holds the keys and values of positions [0, T-1) (committed from a
// forward, as a prefill does) and steps its last position; the block's output there equals the
// forward's last row. Row 1 is a document that starts at position 3 (first = 3), so its cache holds
// only positions [3, T-1) and the step's position is relative to the document.
TEST(BlockSetup, DecodeStepEqualsForwardsLastRow) {
  for (int variant = 0; variant < 3; ++variant) {
    const bool qk = variant != 1, sandwich = variant == 2;
    Rig<double> r(block_config(qk, sandwich), pass_tables(B, Tn, {{}, {3}}));
    randomize_store(r.ps, 21);
    const auto x = randn_vec(std::size_t(r.N) * D, 22);
    const auto out = r.forward(x.data());
    const auto kv = r.layer.kv(r.cache);
    const int KD = r.layer.kv_width();
    // caches (capacity T) per sequence from the forward's keys and values
    std::vector<std::vector<double>> kc(B), vc(B);
    std::vector<int> pos(B), len1(B);
    std::vector<double> xs(std::size_t(B) * D);
    for (int b = 0; b < B; ++b) {
      const int first = r.tabs.first[b * Tn + Tn - 1], n = Tn - first;  // positions of the last row's document
      kc[b].assign(kv.first + std::size_t(b * Tn + first) * KD, kv.first + std::size_t(b * Tn + Tn) * KD);
      vc[b].assign(kv.second + std::size_t(b * Tn + first) * KD, kv.second + std::size_t(b * Tn + Tn) * KD);
      std::fill(kc[b].end() - KD, kc[b].end(), 0.0), std::fill(vc[b].end() - KD, vc[b].end(), 0.0);  // the step writes its own
      pos[b] = n - 1, len1[b] = n;
      std::copy(x.begin() + std::size_t(b * Tn + Tn - 1) * D, x.begin() + std::size_t(b * Tn + Tn) * D, xs.begin() + std::size_t(b) * D);
    }
    double* kp[B] = {kc[0].data(), kc[1].data()};
    double* vp[B] = {vc[0].data(), vc[1].data()};
    HostBuffer<double> mem;
    typename DecoderBlock<double>::DecodeCache dc{};
    lay_out<double>(mem, [&](Carver<double>& a) { r.layer.alloc_decode(r.be, a, dc, B); });
    r.layer.decode(r.be, r.w(), dc, xs.data(), DecodeStep<double>{B, pos.data(), len1.data(), Tn, kp, vp});
    for (int b = 0; b < B; ++b)
      EXPECT_LT(max_scaled_diff(xs.data() + std::size_t(b) * D, out.data() + std::size_t(b * Tn + Tn - 1) * D, D), 1e-13)
          << "qk " << qk << " sandwich " << sandwich << " row " << b;
    // and the step appended its own key and value where the forward had them
    for (int b = 0; b < B; ++b)
      EXPECT_LT(max_scaled_diff(kc[b].data() + std::size_t(pos[b]) * KD, kv.first + std::size_t(b * Tn + Tn - 1) * KD, KD), 1e-13);
  }
}

// Heterogeneous stacks: a block is made from its own sizes, not the model's.
TEST(BlockSetup, BuiltFromItsOwnSpec) {
  LayerSpec s = layer_spec(block_config(true), 0);
  s.num_attention_heads = 2, s.num_key_value_heads = 1, s.intermediate_size = 20;
  LayerRig<DecoderBlock<double>> r(DecoderBlock<double>(s), "model.layers.3.", B, Tn, pass_tables(B, Tn));
  EXPECT_EQ(r.ps.spec("model.layers.3.self_attn.q_proj.weight").shape, (Shape{2 * 4, D}));
  EXPECT_EQ(r.ps.spec("model.layers.3.self_attn.k_proj.weight").shape, (Shape{4, D}));
  EXPECT_EQ(r.ps.spec("model.layers.3.mlp.gate_proj.weight").shape, (Shape{20, D}));
  const LayerSpec back = r.layer.layer_spec();
  EXPECT_EQ(back.num_attention_heads, 2);
  EXPECT_EQ(back.num_key_value_heads, 1);
  EXPECT_EQ(back.intermediate_size, 20);
  EXPECT_EQ(r.layer.kv_width(), 4);
}

}  // namespace

}  // namespace test_layers_block
