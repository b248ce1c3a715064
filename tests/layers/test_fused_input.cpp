// tests/layers/test_fused_input.cpp: the layer-0 input FusedInput<T, F> (fbt/layers/fused_input.hpp) on its
// own, for the three built-in fusers and the three input_norm settings (the two flags of the layer).
//
//   S = shift_right(src + jitter);  X_r = N_in(Fuse(S_r, e_r)) where fed back, N_in(e_r) or e_r where plain
// Setup: B 2, T 5, D 8; row 1 has a document start at t 3 and a plain prefix of 2 (so every plain-row
// reason appears); parameters moved away from init (gains 1 + N(0, 0.2^2), matrices N(0, 0.3^2)).
// Checks:
// - a fed-back pass (source_forward, fed_mask, the fuser's precompute, fused_forward) and its backward
//   (fused_backward, source_backward, pre_backward) against central finite differences of f = sum w * X
//   in double, w.r.t. the source state, e and every parameter: normwise rel err < 1e-6, non-zero gradients;
// - the plain input and its backward likewise (N_in on, N_in off);
// - fed_mask: plain at position 0, document starts and inside the prefix, the count of fed-back rows;
// - the jitter moves each source element by less than sigma and the shift puts zeros at position 0;
// - a decoding step: fed-back rows equal the training pass's rows, plain rows equal plain_forward's
//   (bit-identical), and a step without feedback is plain_forward.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/layers/fused_input.hpp"
#include "fbt/model/builder.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_fused_input {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 2, Tn = 5, D = 8, N = B * Tn;
const std::uint8_t kPlain[N] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0};  // position 0 of each row; row 1: a document starts at t 3
const int kPrefix[B] = {0, 2};                                  // row 1: positions 0-1 are a plain prefix

struct Norms {
  const char* name;
  bool plain, when_fed;  // the layer's flags for input_norm all / fused_only / feedback_passes
};
const Norms kNorms[] = {{"all", true, true}, {"fused_only", false, false}, {"feedback_passes", false, true}};

/// One FusedInput (fuser kind from the config, as the model builds it) with its store and buffers, on the CPU.
template <class F> struct Rig {
  using T = typename F::Scalar;
  FusedInput<T, F> in;
  ParamStore<T> ps;
  CpuBackend<T> be;
  HostBuffer<T> mem;
  typename FuserOps<F>::PreCache pc{};
  typename F::Cache fc{};
  T *pre = nullptr, *dpre = nullptr;  // (N, P)
  int P = 0;
  Rig(const std::string& kind, Norms nm, bool share_gate = false) {
    ModelConfig c;
    c.hidden_size = D, c.num_attention_heads = 2, c.num_key_value_heads = 1, c.fuser = kind;
    c.validate();
    in = FusedInput<T, F>(FuserConfig<F>::make(c));
    in.norm_plain = nm.plain, in.norm_plain_when_fed = nm.when_fed;
    in.declare(ParamRegistry<T>(ps, "model.feedback."), D, 1e-6, 1.0, share_gate);
    ps.finalize();
    randomize_store(ps, 11);
    P = FuserOps<F>::pre_width(in.fuser);
    lay_out_regions<T>(mem, [&](Regions<T>& r) {
      pre = r.keep.take(std::size_t(N) * std::max(P, 1)), dpre = r.keep.take(std::size_t(N) * std::max(P, 1));
      Carver<T> t = r.temp();
      FuserOps<F>::alloc_pre(in.fuser, be, r.keep, t, pc, N, true);
      r.done(t);
      Carver<T> t2 = r.temp();
      in.fuser.alloc(be, r.keep, t2, fc, N, true);
      r.done(t2);
    });
  }
  Rig(const Rig&) = delete;
  Weights<T> w() { return host_weights(ps); }
};

/// Everything a fed-back pass writes, for one (src, e).
template <class T> struct FedPass {
  std::vector<T> S, noise, u, rin, X, mask;
  long fed = 0;
  FedPass() : S(N * D), noise(N * D), u(N * D), rin(N), X(N * D), mask(N) {}
};

template <class F> void fed_forward(Rig<F>& g, FedPass<typename F::Scalar>& p, const typename F::Scalar* src, const typename F::Scalar* e,
                                    const FeedJitter* jit) {
  g.in.source_forward(g.be, p.S.data(), p.noise.data(), src, jit, B, Tn);
  p.fed = g.in.fed_mask(p.mask.data(), kPlain, kPrefix, B, Tn);
  FuserOps<F>::pre_forward(g.in.fuser, g.be, g.w(), g.pc, e, g.pre, N);
  g.in.fused_forward(g.be, g.w(), N, e, p.S.data(), p.mask.data(), g.P > 0 ? g.pre : nullptr, g.fc, p.u.data(), p.rin.data(), p.X.data());
}

/// Calls fn(Fd) with Fd the fuser type in double for `kind`.
template <class Fn> void with_fuser(const std::string& kind, Fn&& fn) {
  if (kind == "glu") fn(GluFuser<double>{});
  else if (kind == "gated_add") fn(GatedAddFuser<double>{});
  else if (kind == "concat") fn(ConcatFuser<double>{});
  else FAIL() << "unknown fuser " << kind;
}

const std::vector<std::string> kFusers = {"glu", "gated_add", "concat"};

}  // namespace

TEST(FusedInput, FedMaskMarksPositionZeroDocumentStartsAndPrefix) {
  std::vector<double> mask(N);
  const long fed = FusedInput<double, GluFuser<double>>::fed_mask(mask.data(), kPlain, kPrefix, B, Tn);
  const std::vector<double> want = {0, 1, 1, 1, 1, 0, 0, 1, 0, 1};
  EXPECT_EQ(mask, want);
  EXPECT_EQ(fed, 6);
  EXPECT_EQ((FusedInput<double, GluFuser<double>>::fed_mask(mask.data(), kPlain, nullptr, B, Tn)), 7) << "no prefix";
}

TEST(FusedInput, JitterIsBoundedAndShiftZeroesPositionZero) {
  Rig<GluFuser<double>> g("glu", kNorms[0]);
  const auto src = randn_vec(N * D, 3);
  std::vector<double> S(N * D), S0(N * D), noise(N * D);
  const FeedJitter jit{7, 0.02, 0};
  g.in.source_forward(g.be, S.data(), noise.data(), src.data(), &jit, B, Tn);
  g.in.source_forward(g.be, S0.data(), noise.data(), src.data(), nullptr, B, Tn);
  double moved = 0;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t)
      for (int c = 0; c < D; ++c) {
        const std::size_t i = (std::size_t(b) * Tn + t) * D + c;
        if (t == 0) {
          EXPECT_EQ(S[i], 0.0);
          EXPECT_EQ(S0[i], 0.0);
          continue;
        }
        EXPECT_EQ(S0[i], src[i - D]) << "shift_right: row t reads source row t-1";
        EXPECT_LT(std::abs(S[i] - S0[i]), 0.02);
        moved = std::max(moved, std::abs(S[i] - S0[i]));
      }
  EXPECT_GT(moved, 1e-3) << "the jitter moved nothing";
}

TEST(FusedInput, FedPassBackwardMatchesFiniteDifference) {
  for (const auto& kind : kFusers)
    for (const Norms& nm : kNorms)
      with_fuser(kind, [&](auto f0) {
        using F = decltype(f0);
        SCOPED_TRACE(kind + " / " + nm.name);
        std::printf("%s, input_norm %s\n", kind.c_str(), nm.name);
        Rig<F> g(kind, nm);
        auto src = randn_vec(N * D, 21), e = randn_vec(N * D, 22);
        const auto wts = random_weights(N * D, 23);
        const FeedJitter jit{5, 0.05, 0};
        FedPass<double> p;
        auto f = [&] {
          fed_forward(g, p, src.data(), e.data(), &jit);
          return dot(wts, p.X.data());
        };
        f();
        EXPECT_EQ(p.fed, 6);
        // backward: dX = w; through N_in and the fuser, then shift_right's transpose and the precompute
        std::vector<double> dX(wts), du(N * D), dS(N * D), de(N * D, 0.0), dsrc(N * D, 0.0);
        g.ps.zero_grad();
        g.be.zero(g.dpre, std::size_t(N) * std::max(g.P, 1));
        g.in.fused_backward(g.be, g.w(), g.fc, p.S.data(), e.data(), g.P > 0 ? g.pre : nullptr, p.u.data(), p.rin.data(), p.mask.data(), dX.data(),
                            du.data(), dS.data(), de.data(), g.dpre, N);
        g.in.source_backward(g.be, dsrc.data(), dS.data(), B, Tn);
        FuserOps<F>::pre_backward(g.in.fuser, g.be, g.w(), g.pc, e.data(), g.dpre, de.data(), N);
        const std::vector<double> grad(g.ps.grads(), g.ps.grads() + g.ps.size());
        expect_input_grad(f, src.data(), dsrc.data(), src.size(), "d source state");
        expect_input_grad(f, e.data(), de.data(), e.size(), "d e");
        expect_store_grads(g.ps, grad, f, kind);
      });
}

TEST(FusedInput, PlainBackwardMatchesFiniteDifference) {
  for (const Norms& nm : {kNorms[0], kNorms[1]}) {
    SCOPED_TRACE(nm.name);
    Rig<GluFuser<double>> g("glu", nm);
    auto e = randn_vec(N * D, 31);
    const auto wts = random_weights(N * D, 32);
    std::vector<double> X(N * D), rin(N);
    auto f = [&] {
      g.in.plain_forward(g.be, g.w(), N, e.data(), X.data(), rin.data());
      return dot(wts, X.data());
    };
    f();
    std::vector<double> de(N * D, 0.0);
    g.ps.zero_grad();
    g.in.plain_backward(g.be, g.w(), de.data(), wts.data(), e.data(), rin.data(), N);
    expect_input_grad(f, e.data(), de.data(), e.size(), std::string("d e, input_norm ") + nm.name);
    if (nm.plain) {  // N_in's gain gets a gradient; the fuser's tensors take no part in a plain pass
      const auto& s = g.ps.spec("model.feedback.in_norm.weight");
      const std::vector<double> grad(g.ps.grads() + s.offset, g.ps.grads() + s.offset + s.size);
      expect_input_grad(f, g.ps.values() + s.offset, grad.data(), s.size, "d in_norm.weight");
    } else {
      for (std::size_t i = 0; i < N * D; ++i) ASSERT_EQ(de[i], wts[i]) << "X = e: de = dX";
    }
  }
}

TEST(FusedInput, DecodeStepRowsAreTheFedPassRowsOrThePlainInput) {
  // feedback_passes: a fed-back training pass normalises its plain rows, a decoding step does not (pass 1's rule)
  for (const Norms& nm : kNorms) {
    SCOPED_TRACE(nm.name);
    Rig<GluFuser<double>> g("glu", nm);
    const auto src = randn_vec(N * D, 41), e = randn_vec(N * D, 42);
    FedPass<double> p;
    fed_forward(g, p, src.data(), e.data(), nullptr);
    std::vector<double> plain(N * D), rin(N), X(N * D), u(N * D), rin2(N);
    g.in.plain_forward(g.be, g.w(), N, e.data(), plain.data(), rin.data());
    g.in.decode_forward(g.be, g.w(), N, e.data(), true, p.S.data(), p.mask.data(), g.pre, g.fc, u.data(), rin2.data(), X.data());
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < D; ++c) {
        const std::size_t i = std::size_t(n) * D + c;
        if (p.mask[n] != 0) EXPECT_EQ(X[i], p.X[i]) << "fed-back row " << n;
        else EXPECT_EQ(X[i], plain[i]) << "plain row " << n;
      }
    g.in.decode_forward(g.be, g.w(), N, e.data(), false, nullptr, nullptr, nullptr, g.fc, u.data(), rin2.data(), X.data());
    EXPECT_EQ(X, plain) << "a step without feedback";
  }
}

}  // namespace test_layers_fused_input
