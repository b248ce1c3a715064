// check_backend_agreement (check/backend_agreement.hpp): a model's step and decoding on the host stand-in
// of the CUDA backend against the CPU, reported per named quantity: a built-in model and a researcher's
// own pieces (examples/own_project: a low-rank fuser, a gated-attention block) agree within float
// tolerance, and a backend with one wrong kernel is caught and named.
#include <gtest/gtest.h>

#include <common/tiny_model.hpp>

#include "examples/own_project/my_pieces.hpp"
#include "fbt/check/backend_agreement.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_cuda_backend_agreement {

using fbt::check::check_backend_agreement;

constexpr double kTol = 1e-4;  // float on two backends whose kernels sum in different orders (measured ~1e-6)

/// The stand-in with one wrong kernel: SwiGLU's first output off by 0.5.
struct BrokenSwiglu : fbt::check::HostBackend {
  static constexpr const char* name = "broken_swiglu";
  void swiglu_forward(float* h, const float* g, const float* u, std::size_t n) {
    HostBackend::swiglu_forward(h, g, u, n);
    h[0] += 0.5f;
  }
};

template <class M> fbt::check::BackendAgreement agreement(const fbt::ModelConfig& cfg) {
  M m(cfg, 1);
  fbt_test::randomize(m, 2);
  const auto tb = fbt_test::tiny_batch(2, 12, m.V, 3);
  fbt::Rng rng(4);
  fbt::StepOptions o;
  o.K = m.feedback() ? 3 : 1, o.sigma = 0.02, o.rng = &rng;
  return check_backend_agreement(m, tb.batch(), o, 4);
}

TEST(BackendAgreement, BuiltInModelsAgreeOnTheHostStandIn) {
  for (const char* f : {"glu", "gated_add", "concat", "none"}) {
    SCOPED_TRACE(f);
    fbt::with_model<float>(fbt_test::tiny_config(f), [&](auto tag) {
      using M = typename decltype(tag)::type;
      const auto r = agreement<M>(fbt_test::tiny_config(f));
      EXPECT_TRUE(r.ok(kTol)) << r.str();
      // K losses, every tensor's gradient, a prefill and 4 steps per decoding mode
      const M m(fbt_test::tiny_config(f), 1);
      const std::size_t modes = m.feedback() ? 3 : 1;
      EXPECT_EQ(r.quantity.size(), std::size_t(m.feedback() ? 3 : 1) + m.params.specs().size() + modes * 5) << r.str();
      EXPECT_EQ(r.backend, "host");
    });
  }
}

TEST(BackendAgreement, AResearchersOwnPiecesAgreeOnTheHostStandIn) {
  fbt::ModelConfig c = fbt_test::tiny_config("lowrank");
  c.fuser_options = {{"rank", fbt::OptionValue::of_int(2)}};
  c.block = "gated_attn", c.block_options = {{"gate_init", fbt::OptionValue::of_real(0.7)}};
  using M = fbt::Model<float, LowRankFuser<float>, GatedBlock<float>>;
  const auto r = agreement<M>(c);
  EXPECT_TRUE(r.ok(kTol)) << r.str();
  std::printf("%s", r.str().substr(0, r.str().find('\n', r.str().find('\n') + 1) + 1).c_str());  // the header and the worst line
}

TEST(BackendAgreement, AWrongKernelIsCaughtAndNamed) {
  using M = fbt::Model<float>;
  M m(fbt_test::tiny_config("glu"), 1);
  fbt_test::randomize(m, 2);
  const auto tb = fbt_test::tiny_batch(2, 12, m.V, 3);
  fbt::StepOptions o;
  o.K = 2;
  const auto r = check_backend_agreement<BrokenSwiglu>(m, tb.batch(), o, 2);
  EXPECT_FALSE(r.ok(kTol)) << r.str();
  EXPECT_GT(r.worst(), 1e-3);
  EXPECT_FALSE(r.worst_name().empty());
  EXPECT_NE(r.str().find("broken_swiglu"), std::string::npos);
}

}  // namespace test_cuda_backend_agreement
