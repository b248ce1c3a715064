// tests/layers/test_head_gate.cpp: the per-head output gate, HeadGateOutput and HeadGatedAttention
// (fbt/layers/head_gate.hpp): y += (o_h * sigmoid(x W_g^T)_h) Wo^T, an output stage over the standard
// projection and kernel.
//
// Setup: D 8, NH 4, NKV 2, head_dim 4, B 2, T 5 (N 10), parameters moved away from init.
// Checks:
// - the stage's backward (d_o, dx and o_proj, gate_proj) against central finite differences of
//   f = sum w * y in double: normwise rel err < 1e-6, non-zero gradient;
// - the whole gated attention layer's backward (dx and every parameter) likewise, with document starts;
// - with W_g = 0 every gate is 1/2: the layer gives exactly half the standard attention's output (1e-14);
// - the stage's decode gives its forward's rows (1e-14); gate_proj.weight (NH, D) follows o_proj;
// - it passes the attention part and stage contracts (layers/contract.hpp), at compile time.
// The same layer on the host stand-in of the CUDA backend: tests/cuda/test_head_gate_host.cpp.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "common/stage_rig.hpp"
#include "fbt/layers/contract.hpp"
#include "fbt/layers/head_gate.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_head_gate {

using namespace fbt;
using namespace fbt_test;

// the gated attention is a PreNormBlock attention part, its stages those of Attention (layers/contract.hpp)
static_assert(check_attention<HeadGatedAttention<double>, CpuBackend<double>>() && check_attention<HeadGatedAttention<float>, CpuBackend<float>>());

namespace {

constexpr int B = 2, Tn = 5, N = B * Tn, D = 8, NH = 4, NKV = 2, hs = 4, QD = NH * hs;

AttentionSpec spec() {
  AttentionSpec s;
  s.hidden_size = D, s.num_heads = NH, s.num_kv_heads = NKV, s.head_dim = hs, s.rope_theta = 100.0, s.max_positions = 16;
  return s;
}

struct StageRigHG {
  HeadGateOutput<double> out{spec()};
  HeadGateOutput<double>::Cache c{};
  HeadGateOutput<double>::DecodeCache dc{};
  StageRig<double> r{"self_attn.", [&](const ParamRegistry<double>& reg) { out.declare(reg); },
                     [&](Carver<double>& keep, Carver<double>& temp) {
                       out.alloc(CpuBackend<double>{}, keep, temp, c, N, true);
                       out.alloc_decode(CpuBackend<double>{}, keep, dc, N);
                     }};
  std::vector<double> forward(const double* x, const double* o) {
    std::vector<double> y(N * D, 0.0);
    out.forward(r.be, r.w(), c, x, o, y.data(), N);
    return y;
  }
};

TEST(HeadGateOutputStage, BackwardMatchesFiniteDifference) {
  StageRigHG g;
  randomize_store(g.r.ps, 1);
  auto x = randn_vec(N * D, 2), o = randn_vec(N * QD, 3);
  const auto w = random_weights(N * D, 4);
  auto f = [&]() { return dot(w, g.forward(x.data(), o.data()).data()); };
  g.r.ps.zero_grad();
  f();
  std::vector<double> d_o(o.size(), 0.0), dx(x.size(), 0.0);
  g.out.backward(g.r.be, g.r.w(), g.c, x.data(), o.data(), w.data(), dx.data(), d_o.data(), N);
  const std::vector<double> grad(g.r.ps.grads(), g.r.ps.grads() + g.r.ps.size());
  expect_input_grad(f, o.data(), d_o.data(), d_o.size(), "head gate d_o");
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "head gate dx");
  expect_store_grads(g.r.ps, grad, f, "head gate");
  ASSERT_EQ(g.r.ps.specs().size(), 2u);
  EXPECT_EQ(g.r.ps.specs()[1].name, "self_attn.gate_proj.weight");
  EXPECT_EQ(g.r.ps.specs()[1].shape, (Shape{NH, D}));
}

TEST(HeadGateOutputStage, DecodeGivesTheForwardRows) {
  StageRigHG g;
  randomize_store(g.r.ps, 5);
  const auto x = randn_vec(N * D, 6), o = randn_vec(N * QD, 7);
  const auto y = g.forward(x.data(), o.data());
  std::vector<double> yd(N * D, 0.0);
  g.out.decode(g.r.be, g.r.w(), g.dc, x.data(), o.data(), yd.data(), N);
  EXPECT_LT(max_scaled_diff(yd, y), 1e-14);
}

template <class A> std::vector<double> layer_forward(LayerRig<A>& r, const double* x) {
  std::vector<double> y(std::size_t(r.N()) * D, 0.0);
  r.layer.forward(r.be, r.w(), r.cache, x, y.data(), r.shape());
  return y;
}

TEST(HeadGatedAttentionLayer, BackwardMatchesFiniteDifference) {
  LayerRig<HeadGatedAttention<double>> r(HeadGatedAttention<double>(spec()), "self_attn.", B, Tn, pass_tables(B, Tn, {{3}, {1, 4}}));
  randomize_store(r.ps, 8);
  auto x = randn_vec(N * D, 9);
  const auto w = random_weights(N * D, 10);
  r.ps.zero_grad();
  layer_forward(r, x.data());
  std::vector<double> dx(x.size(), 0.0);
  r.layer.backward(r.be, r.w(), r.cache, w.data(), dx.data(), x.data(), r.shape());
  const std::vector<double> grad(r.ps.grads(), r.ps.grads() + r.ps.size());
  auto f = [&]() { return dot(w, layer_forward(r, x.data()).data()); };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "gated attention dx");
  expect_store_grads(r.ps, grad, f, "gated attention");
}

TEST(HeadGatedAttentionLayer, ZeroGateWeightsHalveTheStandardAttention) {
  LayerRig<HeadGatedAttention<double>> gated(HeadGatedAttention<double>(spec()), "self_attn.", B, Tn, pass_tables(B, Tn));
  LayerRig<CausalSelfAttention<double>> plain(CausalSelfAttention<double>(spec()), "self_attn.", B, Tn, pass_tables(B, Tn));
  randomize_store(plain.ps, 11);
  for (const auto& s : plain.ps.specs()) std::copy_n(plain.ps.value(s.name), s.size, gated.ps.values() + gated.ps.spec(s.name).offset);
  const auto& gs = gated.ps.spec("self_attn.gate_proj.weight");
  std::fill_n(gated.ps.values() + gs.offset, gs.size, 0.0);
  const auto x = randn_vec(N * D, 12);
  const auto yg = layer_forward(gated, x.data()), yp = layer_forward(plain, x.data());
  double scale = 0;
  for (int i = 0; i < N * D; ++i) {
    EXPECT_NEAR(yg[i], 0.5 * yp[i], 1e-14) << i;
    scale = std::max(scale, std::abs(yp[i]));
  }
  EXPECT_GT(scale, 0.1);  // the comparison is not between zeros
}

}  // namespace

}  // namespace test_layers_head_gate
