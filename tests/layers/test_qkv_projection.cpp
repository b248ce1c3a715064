// tests/layers/test_qkv_projection.cpp: the projection stage of attention, QkvProjection
// (fbt/layers/attention.hpp): q, k, v = x W^T, per-head QK-norm, RoPE.
//
// Setup: D 8, NH 4, NKV 2, head_dim 4, B 2, T 5, parameters moved away from init, theta 100 (every
// frequency turns noticeably), with and without QK-norm, with and without document starts (pos restarts).
// Checks:
// - backward (dx, every parameter tensor, the whole store) against central finite differences of
//   f = sum wq * qr + sum wk * kr + sum wv * v in double: normwise rel err < 1e-6, non-zero gradient;
// - backward accumulates into dx;
// - decode of each position gives the forward's rotated q, k and v of that position (1e-13);
// - parameters q_proj, k_proj, v_proj then q_norm, k_norm: the names and order of Qwen3's checkpoints.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "common/stage_rig.hpp"
#include "fbt/layers/attention.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_qkv_projection {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 2, Tn = 5, N = B * Tn, D = 8, NH = 4, NKV = 2, hs = 4, QD = NH * hs, KD = NKV * hs;

AttentionSpec spec(bool qk_norm) {
  AttentionSpec s;
  s.hidden_size = D, s.num_heads = NH, s.num_kv_heads = NKV, s.head_dim = hs, s.qk_norm = qk_norm, s.rope_theta = 100.0, s.max_positions = 16;
  return s;
}

struct Rig {
  QkvProjection<double> proj;
  QkvProjection<double>::Cache c{};
  QkvProjection<double>::DecodeCache dc{};
  StageRig<double> r;
  PassTables tabs;
  Rig(bool qk, bool docs)
      : proj(spec(qk)),
        r("self_attn.", [&](const ParamRegistry<double>& reg) { proj.declare(reg), proj.declare_norms(reg); },
          [&](Carver<double>& keep, Carver<double>& temp) {
            proj.alloc(CpuBackend<double>{}, keep, temp, c, N, true);
            proj.alloc_decode(CpuBackend<double>{}, keep, dc, B);
          }),
        tabs(docs ? pass_tables(B, Tn, {{3}, {1, 4}}) : pass_tables(B, Tn)) {}
  PassShape shape() const { return PassShape{B, Tn, tabs.pos.data(), tabs.first.data()}; }
  void forward(const double* x) { proj.forward(r.be, r.w(), c, x, shape()); }
};

class QkvProjectionStage : public ::testing::TestWithParam<std::pair<bool, bool>> {};

TEST_P(QkvProjectionStage, BackwardMatchesFiniteDifference) {
  const auto [qk, docs] = GetParam();
  Rig g(qk, docs);
  randomize_store(g.r.ps, 1);
  auto x = randn_vec(N * D, 2);
  const auto wq = random_weights(N * QD, 3), wk = random_weights(N * KD, 4), wv = random_weights(N * KD, 5);
  auto f = [&]() {
    g.forward(x.data());
    return dot(wq, g.c.qr) + dot(wk, g.c.kr) + dot(wv, g.c.v);
  };
  g.r.ps.zero_grad();
  f();
  std::copy(wq.begin(), wq.end(), g.c.dqr), std::copy(wk.begin(), wk.end(), g.c.dkr), std::copy(wv.begin(), wv.end(), g.c.dv);
  std::vector<double> dx(x.size(), 0.5);  // accumulates: starts at 0.5
  g.proj.backward(g.r.be, g.r.w(), g.c, dx.data(), x.data(), g.shape());
  for (auto& d : dx) d -= 0.5;
  const std::vector<double> grad(g.r.ps.grads(), g.r.ps.grads() + g.r.ps.size());
  const std::string what = std::string(qk ? "qknorm" : "noqknorm") + (docs ? "_docs" : "");
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "projection dx " + what);
  expect_store_grads(g.r.ps, grad, f, what);
}

TEST_P(QkvProjectionStage, DecodeGivesTheForwardRows) {
  const auto [qk, docs] = GetParam();
  Rig g(qk, docs);
  randomize_store(g.r.ps, 6);
  const auto x = randn_vec(N * D, 7);
  g.forward(x.data());
  for (int t = 0; t < Tn; ++t) {  // the rows (0, t) and (1, t) as one decoding step of R = 2
    std::vector<double> xs(2 * D);
    std::copy(x.begin() + t * D, x.begin() + (t + 1) * D, xs.begin());
    std::copy(x.begin() + (Tn + t) * D, x.begin() + (Tn + t + 1) * D, xs.begin() + D);
    const int pos[2] = {g.tabs.pos[t], g.tabs.pos[Tn + t]};
    DecodeStep<double> st;
    st.R = 2, st.pos = pos;
    g.proj.decode(g.r.be, g.r.w(), g.dc, xs.data(), st);
    for (int b = 0; b < 2; ++b) {
      const int n = b * Tn + t;
      EXPECT_LT(max_scaled_diff(g.dc.q + b * QD, g.c.qr + n * QD, QD), 1e-13) << "t " << t << " b " << b;
      EXPECT_LT(max_scaled_diff(g.dc.k + b * KD, g.c.kr + n * KD, KD), 1e-13) << "t " << t << " b " << b;
      EXPECT_LT(max_scaled_diff(g.dc.v + b * KD, g.c.v + n * KD, KD), 1e-13) << "t " << t << " b " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, QkvProjectionStage,
                         ::testing::Values(std::make_pair(true, false), std::make_pair(false, false), std::make_pair(true, true)),
                         [](const auto& i) { return std::string(i.param.first ? "qknorm" : "noqknorm") + (i.param.second ? "_docs" : ""); });

TEST(QkvProjectionStageSetup, ParameterNamesAndOrder) {
  Rig g(true, false);
  const std::vector<std::string> expect = {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                           "self_attn.q_norm.weight", "self_attn.k_norm.weight"};
  ASSERT_EQ(g.r.ps.specs().size(), expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) EXPECT_EQ(g.r.ps.specs()[i].name, expect[i]);
}

}  // namespace

}  // namespace test_layers_qkv_projection
