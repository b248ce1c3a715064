// tests/layers/test_block.cpp: Block (fbt/layers/block.hpp), mid = x + Attn(RMSNorm_1(x)),
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
// - float forward agrees with double to 1e-5 of the output scale.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/layers/block.hpp"

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 2, Tn = 5, D = 8;

ModelConfig block_config(bool qk_norm) {
  ModelConfig c;
  c.hidden_size = D, c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 4, c.intermediate_size = 12;
  c.num_hidden_layers = 2, c.max_position_embeddings = 16, c.rope_theta = 100.0, c.qk_norm = qk_norm;
  c.validate();
  return c;
}

template <class T> struct Rig {
  Block<T> blk;
  ParamStore<T> ps;
  Arena<T> arena;
  typename Block<T>::Cache cache;
  typename Block<T>::Scratch scratch;
  RopeTable<T> rope;
  PassTables tabs;
  Rig(const ModelConfig& cfg, PassTables tb) : blk(cfg), tabs(std::move(tb)) {
    blk.declare(ps, 0, cfg.initializer_range, cfg.initializer_range / std::sqrt(2.0 * cfg.num_hidden_layers));
    ps.finalize();
    arena.build([&](Arena<T>& a) {
      blk.alloc(a, cache, B, Tn);
      blk.alloc_scratch(a, scratch, B, Tn);
    });
    rope = RopeTable<T>(cfg.max_position_embeddings, cfg.hs(), cfg.rope_theta);
  }
  Rig(const Rig&) = delete;
  static constexpr int N = B * Tn;
  PassShape shape() const { return PassShape{B, Tn, tabs.pos.data(), tabs.first.data()}; }
  std::vector<T> forward(const T* x) {
    std::vector<T> out(std::size_t(N) * D, T(7));  // stale contents: forward must overwrite
    blk.forward(ps, cache, x, out.data(), shape(), rope);
    return out;
  }
};

struct Case {
  bool qk_norm;
  bool docs;
};
std::string name_of(const Case& c) { return std::string(c.qk_norm ? "qknorm" : "noqknorm") + (c.docs ? "_docs" : ""); }
void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }
PassTables tables(bool docs) { return docs ? pass_tables(B, Tn, {{2}, {3}}) : pass_tables(B, Tn); }

class BlockTest : public ::testing::TestWithParam<Case> {};

TEST_P(BlockTest, ForwardIsPreNormResidualComposition) {
  const Case c = GetParam();
  const ModelConfig cfg = block_config(c.qk_norm);
  Rig<double> r(cfg, tables(c.docs));
  randomize_store(r.ps, 1);
  const auto x = randn_vec(std::size_t(r.N) * D, 2);
  const auto out = r.forward(x.data());

  // the same block by hand, on fresh caches
  const int N = r.N;
  Arena<double> a2;
  typename CausalSelfAttention<double>::Cache ac;
  typename SwiGLUMlp<double>::Cache mc;
  a2.build([&](Arena<double>& a) {
    r.blk.attn.alloc(a, ac, B, Tn);
    r.blk.mlp.alloc(a, mc, B, Tn);
  });
  std::vector<double> ln(N * D), rs(N), mid = x, ref;
  rmsnorm_forward(smat(ln.data(), N, D), vec(rs.data(), N), csmat(x.data(), N, D),
                  cvec(r.ps.value("model.layers.0.input_layernorm.weight"), D), cfg.rms_norm_eps);
  r.blk.attn.forward(r.ps, ac, ln.data(), mid.data(), r.shape(), r.rope);  // mid = x + attn(ln1)
  ref = mid;
  rmsnorm_forward(smat(ln.data(), N, D), vec(rs.data(), N), csmat(mid.data(), N, D),
                  cvec(r.ps.value("model.layers.0.post_attention_layernorm.weight"), D), cfg.rms_norm_eps);
  r.blk.mlp.forward(r.ps, mc, ln.data(), ref.data(), N);  // out = mid + mlp(ln2)
  EXPECT_LT(max_scaled_diff(out, ref), 1e-13);
  EXPECT_LT(max_scaled_diff(r.cache.mid, mid.data(), mid.size()), 1e-13);
}

TEST_P(BlockTest, BackwardMatchesFiniteDifference) {
  const Case c = GetParam();
  Rig<double> r(block_config(c.qk_norm), tables(c.docs));
  randomize_store(r.ps, 3);
  auto x = randn_vec(std::size_t(r.N) * D, 4);
  const auto w = random_weights(std::size_t(r.N) * D, 5);
  r.ps.zero_grad();
  r.forward(x.data());
  std::vector<double> dx = w;  // in place: d out on entry
  r.blk.backward(r.ps, r.cache, r.scratch, dx.data(), x.data(), r.shape(), r.rope);
  const std::vector<double> grad(r.ps.grads(), r.ps.grads() + r.ps.size());
  auto f = [&]() { return dot(w, r.forward(x.data()).data()); };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "block dx " + name_of(c));
  expect_store_grads(r.ps, grad, f, "block " + name_of(c));

  // parameter grads accumulate: a second backward (fresh d out, same cache) doubles them, and the
  // in-place dx is the same as the first time
  r.forward(x.data());
  std::vector<double> dx2 = w;
  r.blk.backward(r.ps, r.cache, r.scratch, dx2.data(), x.data(), r.shape(), r.rope);
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx2[i], dx[i], 1e-13);
  for (std::size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(r.ps.grads()[i], 2 * grad[i], 1e-12);
}

TEST_P(BlockTest, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale
  const Case c = GetParam();
  Rig<double> rd(block_config(c.qk_norm), tables(c.docs));
  Rig<float> rf(block_config(c.qk_norm), tables(c.docs));
  randomize_store(rd.ps, 6);
  copy_values(rf.ps, rd.ps);
  const auto x = randn_vec(std::size_t(rd.N) * D, 7);
  const auto xf = cast_vec<float>(x);
  const double d = max_scaled_diff(rf.forward(xf.data()), rd.forward(x.data()));
  std::printf("  block %s float vs double: %.3g\n", name_of(c).c_str(), d);
  EXPECT_LT(d, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cases, BlockTest, ::testing::Values(Case{true, false}, Case{false, false}, Case{true, true}),
                         [](const ::testing::TestParamInfo<Case>& i) { return name_of(i.param); });

TEST(BlockSetup, ParameterNames) {
  Rig<double> r(block_config(true), tables(false));
  for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                        "self_attn.v_proj.weight", "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                        "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
    EXPECT_TRUE(r.ps.has(std::string("model.layers.0.") + n)) << n;
  EXPECT_EQ(r.ps.specs().size(), 11u);
}

}  // namespace
