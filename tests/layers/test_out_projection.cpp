// tests/layers/test_out_projection.cpp: the output stage of attention, OutProjection
// (fbt/layers/attention.hpp): y += o Wo^T.
//
// Setup: D 8, NH 4, head_dim 4 (o is (N, 16), Wo (8, 16)), N 6, parameters moved away from init.
// Checks:
// - backward (d_o and o_proj) against central finite differences of f = sum w * y in double: normwise
//   rel err < 1e-6, non-zero gradient; d_o accumulates; dx (x is not read) is left untouched;
// - forward accumulates into y; decode gives the forward's rows (1e-14);
// - its one parameter is o_proj.weight (D, NH*hs).
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "common/stage_rig.hpp"
#include "fbt/layers/attention.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_out_projection {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int N = 6, D = 8, NH = 4, hs = 4, QD = NH * hs;

struct Rig {
  OutProjection<double> out{AttentionSpec{D, NH, 2, hs}};
  OutProjection<double>::Cache c{};
  OutProjection<double>::DecodeCache dc{};
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

TEST(OutProjectionStage, BackwardMatchesFiniteDifference) {
  Rig g;
  randomize_store(g.r.ps, 1);
  const auto x = randn_vec(N * D, 2);
  auto o = randn_vec(N * QD, 3);
  const auto w = random_weights(N * D, 4);
  auto f = [&]() { return dot(w, g.forward(x.data(), o.data()).data()); };
  g.r.ps.zero_grad();
  std::vector<double> d_o(o.size(), 0.5), dx(x.size(), 0.0);
  g.out.backward(g.r.be, g.r.w(), g.c, x.data(), o.data(), w.data(), dx.data(), d_o.data(), N);
  for (auto& d : d_o) d -= 0.5;
  const std::vector<double> grad(g.r.ps.grads(), g.r.ps.grads() + g.r.ps.size());
  expect_input_grad(f, o.data(), d_o.data(), d_o.size(), "output d_o");
  expect_store_grads(g.r.ps, grad, f, "output");
  for (double d : dx) EXPECT_EQ(d, 0.0);
}

TEST(OutProjectionStage, ForwardAccumulatesAndDecodeGivesTheForwardRows) {
  Rig g;
  randomize_store(g.r.ps, 5);
  const auto x = randn_vec(N * D, 6), o = randn_vec(N * QD, 7);
  const auto y = g.forward(x.data(), o.data());
  std::vector<double> y2 = randn_vec(N * D, 8);
  const auto y0 = y2;
  g.out.forward(g.r.be, g.r.w(), g.c, x.data(), o.data(), y2.data(), N);
  for (int i = 0; i < N * D; ++i) EXPECT_NEAR(y2[i], y0[i] + y[i], 1e-13);
  std::vector<double> yd(N * D, 0.0);
  g.out.decode(g.r.be, g.r.w(), g.dc, x.data(), o.data(), yd.data(), N);
  EXPECT_LT(max_scaled_diff(yd, y), 1e-14);
  ASSERT_EQ(g.r.ps.specs().size(), 1u);
  EXPECT_EQ(g.r.ps.specs()[0].name, "self_attn.o_proj.weight");
  EXPECT_EQ(g.r.ps.specs()[0].shape, (Shape{D, QD}));
}

}  // namespace

}  // namespace test_layers_out_projection
