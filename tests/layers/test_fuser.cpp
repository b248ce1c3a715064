// tests/layers/test_fuser.cpp: the built-in fusers GluFuser, GatedAddFuser and ConcatFuser (fbt/layers/*_fuser.hpp),
// each written against the fuser contract of fbt/layers/fuser.hpp.
//
//   glu        u = (W_U s) * sigmoid(W_G N_g(e))
//   gated_add  u = e + alpha * sigmoid(W_g [N_g(e); N_s(s)] + b_g) * (W_s N_s(s))
//   concat     u = W_c [N_s(s); N_g(e)]
// Setup: D 8, N 10 (B*T = 2*5); parameters moved away from init (gains/bias 1 + N(0, 0.2^2), matrices
// N(0, 0.3^2)). Checks:
// - forward (pre_forward + forward) against the formulas as plain loops (1e-12 of the output scale),
//   with the concatenation orders and tensor names of spec section 9 and alpha from the config;
// - backward + pre_backward w.r.t. s, e and every parameter tensor (then the whole store) against
//   central finite differences of f = sum w * u in double: normwise rel err < 1e-6, non-zero gradients;
//   also for two passes sharing one precompute (the multi-pass use);
// - ds = nullptr (detached) gives the same parameter grads and de (1e-14) and writes no ds;
// - gradients accumulate (pre-filled ds, de and parameter grads are added to);
// - init (spec sections 2 and 9), with fresh ps.init values: glu W_U = I and W_G sample std within 30%
//   of sqrt(1e-6/D); gated_add Fuse(s, e) == e exactly; concat Fuse(s, e) == e / rms(e) to rel 1e-5
//   (eps = 1e-6), and == e / sqrt(mean(e^2) + eps) to 1e-12;
// - float forward agrees with double to 1e-5 of the output scale.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/layers/contract.hpp"
#include "fbt/model/builder.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_fuser {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int N = 10, D = 8;
const std::string kP = "model.feedback.";

ModelConfig fuser_config(const std::string& fuser, int d = D) {
  ModelConfig c;
  c.hidden_size = d, c.num_attention_heads = 2, c.num_key_value_heads = 1, c.fuser = fuser;
  c.validate();
  return c;
}

/// One fuser (type F, built from the config as the model builds it) with its store, its precompute and P
/// per-pass caches, on the CPU backend.
template <class F> struct Rig {
  using T = typename F::Scalar;
  static_assert(check_fuser<F, CpuBackend<T>>(), "");
  int n, P;
  F fz;
  ParamStore<T> ps;
  CpuBackend<T> be;
  HostBuffer<T> mem;
  typename FuserOps<F>::PreCache pc{};
  std::vector<typename F::Cache> caches;
  T *pre = nullptr, *dpre = nullptr;  // (n, D)
  Rig(const ModelConfig& cfg, int n_ = N, int passes = 1) : n(n_), P(passes), fz(FuserConfig<F>::make(cfg)), caches(passes) {
    fz.declare(ParamRegistry<T>(ps, kP));
    ps.finalize();
    lay_out_regions<T>(mem, [&](Regions<T>& r) {
      pre = r.keep.take(std::size_t(n) * d()), dpre = r.keep.take(std::size_t(n) * d());
      Carver<T> t = r.temp();
      fz.alloc_pre(be, r.keep, t, pc, n, true);
      r.done(t);
      for (auto& c : caches) {
        Carver<T> tc = r.temp();
        fz.alloc(be, r.keep, tc, c, n, true);
        r.done(tc);
      }
    });
  }
  Rig(const Rig&) = delete;
  int d() const { return fz.D; }
  Weights<T> w() { return host_weights(ps); }
  /// u_p = Fuse(s_p, e) for each pass p (s holds P (n, D) blocks); returns the P blocks of u.
  std::vector<T> forward(const T* s, const T* e) {
    std::vector<T> u(std::size_t(P) * n * d(), T(0));
    fz.pre_forward(be, w(), pc, e, pre, n);
    be.zero(dpre, std::size_t(n) * d());
    for (int p = 0; p < P; ++p) fz.forward(be, w(), caches[p], s + std::size_t(p) * n * d(), e, pre, u.data() + std::size_t(p) * n * d(), n);
    return u;
  }
  /// After forward: per-pass backward (last pass first, as the model runs it), then one pre_backward.
  void backward(const T* du, T* ds, T* de, const T* s, const T* e) {
    for (int p = P - 1; p >= 0; --p) {
      const std::size_t o = std::size_t(p) * n * d();
      fz.backward(be, w(), caches[p], s + o, e, pre, du + o, ds ? ds + o : nullptr, de, dpre, n);
    }
    fz.pre_backward(be, w(), pc, e, dpre, de, n);
  }
};

/// Calls fn(Kind<F>) for the fuser named `kind`; Kind<F>::of<T> is F<T>.
template <template <class> class F> struct Kind {
  template <class T> using of = F<T>;
};
template <class Fn> void with_kind(const std::string& kind, Fn&& fn) {
  if (kind == "glu") fn(Kind<GluFuser>{});
  else if (kind == "gated_add") fn(Kind<GatedAddFuser>{});
  else if (kind == "concat") fn(Kind<ConcatFuser>{});
  else FAIL() << "unknown fuser " << kind;
}
/// FBT_FUSER(kind, { body }): the body with Fd / Ff the fuser type in double / float.
#define FBT_FUSER(kind, ...)                                              \
  with_kind(kind, [&](auto K_) {                                         \
    using Fd = typename decltype(K_)::template of<double>;                \
    using Ff = typename decltype(K_)::template of<float>;                 \
    (void)sizeof(Ff*);                                                    \
    __VA_ARGS__                                                           \
  })

const std::vector<std::string> kFusers = {"glu", "gated_add", "concat"};

/// rmsnorm of each row with gain g (plain loops).
std::vector<double> ref_norm(const std::vector<double>& x, const double* g, int rows, int d, double eps) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double ms = 0;
    for (int c = 0; c < d; ++c) ms += x[r * d + c] * x[r * d + c];
    const double inv = 1.0 / std::sqrt(ms / d + eps);
    for (int c = 0; c < d; ++c) y[r * d + c] = x[r * d + c] * inv * g[c];
  }
  return y;
}
/// y_r = W [a_r; b_r] with W (D, cols) row-major, reading a (and b, when cols = 2D) per row.
std::vector<double> ref_matvec(const double* W, int cols, const std::vector<double>& a, const std::vector<double>* b) {
  std::vector<double> y(std::size_t(N) * D, 0.0);
  for (int r = 0; r < N; ++r)
    for (int o = 0; o < D; ++o) {
      double acc = 0;
      for (int c = 0; c < D; ++c) acc += W[o * cols + c] * a[r * D + c];
      if (b)
        for (int c = 0; c < D; ++c) acc += W[o * cols + D + c] * (*b)[r * D + c];
      y[r * D + o] = acc;
    }
  return y;
}
double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::vector<double> ref_fuse(const std::string& kind, const ParamStore<double>& ps, const std::vector<double>& s, const std::vector<double>& e,
                             double alpha, double eps) {
  const auto ng = ref_norm(e, ps.value(kP + "gate_norm.weight"), N, D, eps);
  std::vector<double> u(std::size_t(N) * D);
  if (kind == "glu") {
    const auto a = ref_matvec(ps.value(kP + "w_u.weight"), D, s, nullptr), z = ref_matvec(ps.value(kP + "w_g.weight"), D, ng, nullptr);
    for (std::size_t i = 0; i < u.size(); ++i) u[i] = a[i] * sig(z[i]);
  } else if (kind == "gated_add") {
    const auto ns = ref_norm(s, ps.value(kP + "state_norm.weight"), N, D, eps);
    const auto z = ref_matvec(ps.value(kP + "w_g.weight"), 2 * D, ng, &ns);  // gate input [N_g(e); N_s(s)]
    const auto ws = ref_matvec(ps.value(kP + "w_s.weight"), D, ns, nullptr);
    const double* b = ps.value(kP + "w_g.bias");
    for (int r = 0; r < N; ++r)
      for (int c = 0; c < D; ++c) u[r * D + c] = e[r * D + c] + alpha * sig(z[r * D + c] + b[c]) * ws[r * D + c];
  } else {
    const auto ns = ref_norm(s, ps.value(kP + "state_norm.weight"), N, D, eps);
    u = ref_matvec(ps.value(kP + "w_c.weight"), 2 * D, ns, &ng);  // [N_s(s); N_g(e)]
  }
  return u;
}

class Fuser : public ::testing::TestWithParam<std::string> {};

TEST_P(Fuser, ForwardMatchesFormula) {
  const std::string kind = GetParam();
  ModelConfig cfg = fuser_config(kind);
  cfg.gated_add_alpha = 0.35;  // alpha comes from the config
  FBT_FUSER(kind, {
    Rig<Fd> r(cfg);
    randomize_store(r.ps, 1);
    const auto s = randn_vec(N * D, 2), e = randn_vec(N * D, 3);
    const auto u = r.forward(s.data(), e.data());
    const double d = max_scaled_diff(u, ref_fuse(kind, r.ps, s, e, 0.35, cfg.rms_norm_eps));
    EXPECT_LT(d, 1e-12) << kind;
  });
}

TEST_P(Fuser, ParameterNamesAndShapes) {
  const std::string kind = GetParam();
  FBT_FUSER(kind, {
  Rig<Fd> r(fuser_config(kind));
  std::vector<std::pair<std::string, Shape>> expect;
  if (kind == "glu") expect = {{"w_u.weight", {D, D}}, {"w_g.weight", {D, D}}, {"gate_norm.weight", {D}}};
  if (kind == "gated_add")
    expect = {{"w_g.weight", {D, 2 * D}}, {"w_g.bias", {D}}, {"w_s.weight", {D, D}}, {"gate_norm.weight", {D}}, {"state_norm.weight", {D}}};
  if (kind == "concat") expect = {{"w_c.weight", {D, 2 * D}}, {"gate_norm.weight", {D}}, {"state_norm.weight", {D}}};
  ASSERT_EQ(r.ps.specs().size(), expect.size());
  for (const auto& [name, shape] : expect) {
    ASSERT_TRUE(r.ps.has(kP + name)) << name;
    EXPECT_EQ(r.ps.spec(kP + name).shape, shape) << name;
  }
  EXPECT_STREQ(Fd::name, kind.c_str());
  });
}

template <class F> void grad_check(const std::string& kind, int passes) {
  const std::string tag = kind + (passes > 1 ? "_P" + std::to_string(passes) : "");
  Rig<F> r(fuser_config(kind), N, passes);
  randomize_store(r.ps, 4);
  auto s = randn_vec(std::size_t(passes) * N * D, 5), e = randn_vec(N * D, 6, 1.0, 0.3);
  const auto w = random_weights(std::size_t(passes) * N * D, 7);
  r.ps.zero_grad();
  r.forward(s.data(), e.data());
  std::vector<double> ds(s.size(), 0.0), de(e.size(), 0.0);
  r.backward(w.data(), ds.data(), de.data(), s.data(), e.data());
  const std::vector<double> grad(r.ps.grads(), r.ps.grads() + r.ps.size());
  auto f = [&]() { return dot(w, r.forward(s.data(), e.data()).data()); };
  expect_input_grad(f, s.data(), ds.data(), ds.size(), "fuser ds " + tag);
  expect_input_grad(f, e.data(), de.data(), de.size(), "fuser de " + tag);
  expect_store_grads(r.ps, grad, f, tag);
}

TEST_P(Fuser, BackwardMatchesFiniteDifference) { FBT_FUSER(GetParam(), { grad_check<Fd>(GetParam(), 1); }); }
TEST_P(Fuser, TwoPassesShareOnePrecompute) { FBT_FUSER(GetParam(), { grad_check<Fd>(GetParam(), 2); }); }

TEST_P(Fuser, DetachedStateGivesSameParamGradsAndDe) {
  const std::string kind = GetParam();
  FBT_FUSER(kind, {
  Rig<Fd> r(fuser_config(kind));
  randomize_store(r.ps, 8);
  const auto s = randn_vec(N * D, 9), e = randn_vec(N * D, 10);
  const auto w = random_weights(N * D, 11);
  // attached
  r.ps.zero_grad();
  r.forward(s.data(), e.data());
  std::vector<double> ds(s.size(), 0.0), de(e.size(), 0.0);
  r.backward(w.data(), ds.data(), de.data(), s.data(), e.data());
  const std::vector<double> grad(r.ps.grads(), r.ps.grads() + r.ps.size());
  // detached: ds = nullptr
  r.ps.zero_grad();
  r.forward(s.data(), e.data());
  std::vector<double> de2(e.size(), 0.0);
  r.backward(w.data(), nullptr, de2.data(), s.data(), e.data());
  for (std::size_t i = 0; i < de.size(); ++i) EXPECT_NEAR(de2[i], de[i], 1e-14) << kind << " de " << i;
  for (std::size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(r.ps.grads()[i], grad[i], 1e-14) << kind << " param grad " << i;
  double ds_norm = 0;
  for (double v : ds) ds_norm += v * v;
  EXPECT_GT(ds_norm, 0.0) << "the attached run must have a state gradient for this test to mean anything";
  });
}

TEST_P(Fuser, BackwardAccumulates) {
  const std::string kind = GetParam();
  FBT_FUSER(kind, {
  Rig<Fd> r(fuser_config(kind));
  randomize_store(r.ps, 12);
  const auto s = randn_vec(N * D, 13), e = randn_vec(N * D, 14);
  const auto w = random_weights(N * D, 15);
  r.ps.zero_grad();
  r.forward(s.data(), e.data());
  std::vector<double> ds(s.size(), 0.0), de(e.size(), 0.0);
  r.backward(w.data(), ds.data(), de.data(), s.data(), e.data());
  const std::vector<double> grad(r.ps.grads(), r.ps.grads() + r.ps.size());
  // second run onto pre-filled buffers: ds, de start at 0.5, param grads keep the first run's
  r.forward(s.data(), e.data());
  std::vector<double> ds2(s.size(), 0.5), de2(e.size(), 0.5);
  r.backward(w.data(), ds2.data(), de2.data(), s.data(), e.data());
  for (std::size_t i = 0; i < ds.size(); ++i) EXPECT_NEAR(ds2[i], ds[i] + 0.5, 1e-13) << kind;
  for (std::size_t i = 0; i < de.size(); ++i) EXPECT_NEAR(de2[i], de[i] + 0.5, 1e-13) << kind;
  for (std::size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(r.ps.grads()[i], 2 * grad[i], 1e-12) << kind;
  });
}

TEST_P(Fuser, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale
  const std::string kind = GetParam();
  FBT_FUSER(kind, {
  Rig<Fd> rd(fuser_config(kind));
  Rig<Ff> rf(fuser_config(kind));
  randomize_store(rd.ps, 16);
  copy_values(rf.ps, rd.ps);
  const auto s = randn_vec(N * D, 17), e = randn_vec(N * D, 18);
  const auto sf = cast_vec<float>(s), ef = cast_vec<float>(e);
  const double d = max_scaled_diff(rf.forward(sf.data(), ef.data()), rd.forward(s.data(), e.data()));
  std::printf("  %s float vs double: %.3g\n", kind.c_str(), d);
  EXPECT_LT(d, 1e-5);
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, Fuser, ::testing::ValuesIn(kFusers), [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ---- init (spec sections 2 and 9), on fresh ps.init values ----

constexpr int kInitD = 32;  // 1024 entries per matrix: a sample std within a few percent

TEST(FuserInit, GluIsIdentityTimesNearlyHalfGate) {
  Rig<GluFuser<double>> r(fuser_config("glu", kInitD), N);
  r.ps.init(42);
  const double* wu = r.ps.value(kP + "w_u.weight");
  for (int i = 0; i < kInitD; ++i)
    for (int j = 0; j < kInitD; ++j) ASSERT_EQ(wu[i * kInitD + j], i == j ? 1.0 : 0.0) << "W_U must be I at init";
  const double* wg = r.ps.value(kP + "w_g.weight");
  double ss = 0, mean = 0;
  for (int i = 0; i < kInitD * kInitD; ++i) ss += wg[i] * wg[i], mean += wg[i];
  mean /= kInitD * kInitD;
  const double sd = std::sqrt(ss / (kInitD * kInitD)), want = std::sqrt(1e-6 / kInitD);
  std::printf("  glu W_G sample std %.4g, expected %.4g\n", sd, want);
  EXPECT_NEAR(sd, want, 0.3 * want);
  EXPECT_LT(std::abs(mean), 4 * want / kInitD);  // 4 standard errors of the mean
  // so Fuse(s, e) = s * sigmoid(~1e-3): within 2e-3 of s / 2
  const auto s = randn_vec(N * kInitD, 43), e = randn_vec(N * kInitD, 44);
  const auto u = r.forward(s.data(), e.data());
  for (std::size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(u[i], 0.5 * s[i], 2e-3 * std::abs(s[i]) + 1e-15);
}

TEST(FuserInit, GluInitKnobs) {
  ModelConfig c = fuser_config("glu", kInitD);
  c.glu_init = "identity_both";
  Rig<GluFuser<double>> a(c, N);
  a.ps.init(1);
  const double* wg = a.ps.value(kP + "w_g.weight");
  for (int i = 0; i < kInitD; ++i)
    for (int j = 0; j < kInitD; ++j) ASSERT_EQ(wg[i * kInitD + j], i == j ? 1.0 : 0.0) << "identity_both: W_G = I";
  c.glu_init = "fan_in";
  Rig<GluFuser<double>> b(c, N);
  b.ps.init(2);
  for (const char* name : {"w_u.weight", "w_g.weight"}) {
    const double* w = b.ps.value(kP + name);
    double ss = 0;
    for (int i = 0; i < kInitD * kInitD; ++i) ss += w[i] * w[i];
    const double sd = std::sqrt(ss / (kInitD * kInitD)), want = 1.0 / std::sqrt(double(kInitD));
    EXPECT_NEAR(sd, want, 0.3 * want) << "fan_in " << name;
  }
}

TEST(FuserInit, GatedAddIsExactlyTheEmbedding) {
  Rig<GatedAddFuser<double>> r(fuser_config("gated_add", kInitD), N);
  r.ps.init(7);
  const double* ws = r.ps.value(kP + "w_s.weight");
  for (int i = 0; i < kInitD * kInitD; ++i) ASSERT_EQ(ws[i], 0.0) << "W_s must be 0 at init";
  const auto s = randn_vec(N * kInitD, 8, 3.0), e = randn_vec(N * kInitD, 9);
  const auto u = r.forward(s.data(), e.data());
  for (std::size_t i = 0; i < u.size(); ++i) ASSERT_EQ(u[i], e[i]) << "gated_add at init must return e exactly, i " << i;
}

TEST(FuserInit, ConcatIsTheNormalisedEmbedding) {
  const double eps = 1e-6;
  Rig<ConcatFuser<double>> r(fuser_config("concat", kInitD), N);
  r.ps.init(10);
  const double* wc = r.ps.value(kP + "w_c.weight");
  for (int i = 0; i < kInitD; ++i)
    for (int j = 0; j < 2 * kInitD; ++j) ASSERT_EQ(wc[i * 2 * kInitD + j], j == kInitD + i ? 1.0 : 0.0) << "W_c must be [0 | I]";
  const auto s = randn_vec(N * kInitD, 11, 3.0), e = randn_vec(N * kInitD, 12);
  const auto u = r.forward(s.data(), e.data());
  for (int n = 0; n < N; ++n) {
    double ms = 0;
    for (int c = 0; c < kInitD; ++c) ms += e[n * kInitD + c] * e[n * kInitD + c];
    ms /= kInitD;
    for (int c = 0; c < kInitD; ++c) {
      const double x = e[n * kInitD + c], got = u[n * kInitD + c];
      // N_g(e) = e / rms(e) up to eps: relative difference about eps / (2 mean(e^2)) ~ 5e-7 here
      EXPECT_NEAR(got, x / std::sqrt(ms), 1e-5 * std::abs(x / std::sqrt(ms))) << n << "," << c;
      EXPECT_NEAR(got, x / std::sqrt(ms + eps), 1e-12 * std::max(1.0, std::abs(got))) << n << "," << c;
    }
  }
}

}  // namespace

}  // namespace test_layers_fuser
