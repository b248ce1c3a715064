// Muon and NorMuon (train/muon.hpp): Newton-Schulz against a plain-loop reference in double, the
// singular values it produces, one Muon step and two NorMuon steps (with weight decay, so the second
// moment's EMA matters) against the equations computed here in double, the Adam group of the same
// grouped step against AdamW's equations, the parameter groups of real models' name tables, and refusals.
#include <gtest/gtest.h>

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fbt/model/model.hpp"
#include "fbt/train/muon.hpp"
#include "../common/tiny_model.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_muon {

using namespace fbt;

namespace {

using Mat = std::vector<double>;  // row-major (R, C)

/// C (n, m) = A (n, k) B (k, m), plain loops.
Mat matmul(const Mat& A, const Mat& B, int n, int k, int m) {
  Mat C(std::size_t(n) * m, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double s = 0;
      for (int l = 0; l < k; ++l) s += A[std::size_t(i) * k + l] * B[std::size_t(l) * m + j];
      C[std::size_t(i) * m + j] = s;
    }
  return C;
}
Mat transpose(const Mat& A, int n, int m) {
  Mat T(A.size());
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) T[std::size_t(j) * n + i] = A[std::size_t(i) * m + j];
  return T;
}

/// The reference Newton-Schulz, as muon.py writes it: transpose a tall G, X = G / (||G|| + 1e-7), then
/// A = X X^T, B = b A + c A A, X = a X + B X, and transpose back.
Mat ns_reference(Mat G, int R, int C, int steps) {
  const bool tall = R > C;
  if (tall) G = transpose(G, R, C), std::swap(R, C);
  double nrm = 0;
  for (double g : G) nrm += g * g;
  nrm = std::sqrt(nrm);
  Mat X = G;
  for (double& x : X) x /= nrm + 1e-7;
  for (int k = 0; k < steps; ++k) {
    const Mat A = matmul(X, transpose(X, R, C), R, C, R);
    const Mat AA = matmul(A, A, R, R, R);
    Mat B(A.size());
    for (std::size_t i = 0; i < A.size(); ++i) B[i] = -4.7750 * A[i] + 2.0315 * AA[i];
    const Mat BX = matmul(B, X, R, R, C);
    for (std::size_t i = 0; i < X.size(); ++i) X[i] = 3.4445 * X[i] + BX[i];
  }
  return tall ? transpose(X, R, C) : X;
}

Mat random_mat(int R, int C, std::uint64_t seed, double sd = 1.0) {
  Rng rng(seed);
  Mat m(std::size_t(R) * C);
  for (double& x : m) x = rng.normal(0.0, sd);
  return m;
}

/// max |a - b| / max |b|
template <class U> double rel(const U* a, const Mat& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) num = std::max(num, std::fabs(double(a[i]) - b[i])), den = std::max(den, std::fabs(b[i]));
  return num / std::max(den, 1e-300);
}

template <class T> std::vector<T> cast(const Mat& m) { return std::vector<T>(m.begin(), m.end()); }

Eigen::VectorXd singular_values(const Mat& m, int R, int C) {
  Eigen::MatrixXd A(R, C);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) A(i, j) = m[std::size_t(i) * C + j];
  return Eigen::JacobiSVD<Eigen::MatrixXd>(A).singularValues();
}

// --------------------------------------------------------------------------------- Newton-Schulz

// The backend's Newton-Schulz (tall matrices iterated in place as X^T X and X B) equals the reference
// (explicit transposes) for wide, tall and square inputs: 1e-12 relative in double, 1e-5 in float.
TEST(NewtonSchulz, MatchesPlainLoopReference) {
  const int shapes[][2] = {{6, 10}, {12, 5}, {8, 8}, {1, 7}, {9, 1}};
  for (const auto& sh : shapes) {
    const int R = sh[0], C = sh[1];
    SCOPED_TRACE(std::to_string(R) + "x" + std::to_string(C));
    const Mat G = random_mat(R, C, 7 + R * 31 + C);
    for (int steps : {1, 5}) {
      const Mat ref = ns_reference(G, R, C, steps);
      CpuBackend<double> bd;
      MuonWorkspace<CpuBackend<double>> wd;
      const std::vector<double> gd = cast<double>(G);
      EXPECT_LT(rel(newton_schulz(bd, gd.data(), R, C, steps, wd), ref), 1e-12) << steps << " steps, double";
      CpuBackend<float> bf;
      MuonWorkspace<CpuBackend<float>> wf;
      const std::vector<float> gf = cast<float>(G);
      EXPECT_LT(rel(newton_schulz(bf, gf.data(), R, C, steps, wf), ref), 1e-5) << steps << " steps, float";
    }
  }
}

// Newton-Schulz acts on each singular value alone: the output's singular values are p^5(s / ||G||_F),
// p(x) = a x + b x^3 + c x^5 (1e-5 absolute, float). For random Gaussian matrices of aspect ratio >= 2
// (whose smallest normalised singular value is not tiny) they all land in Muon's band: at least p's
// local minimum p(1.0501) = 0.6818, at most its local maximum p(0.5545) = 1.2025, which no singular value
// starting in [0, 1] can pass (these inputs give about [0.68, 1.13]).
TEST(NewtonSchulz, SingularValuesFollowThePolynomialIntoTheBand) {
  const int shapes[][2] = {{32, 64}, {64, 32}, {24, 96}, {128, 48}};
  double lo = 10, hi = 0;
  for (const auto& sh : shapes) {
    const int R = sh[0], C = sh[1];
    SCOPED_TRACE(std::to_string(R) + "x" + std::to_string(C));
    const Mat G = random_mat(R, C, 100 + R + C, 0.02);
    CpuBackend<float> be;
    MuonWorkspace<CpuBackend<float>> ws;
    const std::vector<float> gf = cast<float>(G);
    const float* O = newton_schulz(be, gf.data(), R, C, 5, ws);
    const Eigen::VectorXd so = singular_values(Mat(O, O + std::size_t(R) * C), R, C);
    Eigen::VectorXd sg = singular_values(G, R, C);
    double nrm = 0;
    for (double g : G) nrm += g * g;
    sg /= std::sqrt(nrm) + 1e-7;
    std::vector<double> want;
    for (Eigen::Index i = 0; i < sg.size(); ++i) {
      double x = sg(i);
      for (int k = 0; k < 5; ++k) x = 3.4445 * x - 4.7750 * x * x * x + 2.0315 * x * x * x * x * x;
      want.push_back(x);
    }
    std::sort(want.rbegin(), want.rend());  // p^5 is not monotonic: compare the sorted values
    for (Eigen::Index i = 0; i < so.size(); ++i) EXPECT_NEAR(so(i), want[std::size_t(i)], 1e-5) << "singular value " << i;
    lo = std::min(lo, so.minCoeff()), hi = std::max(hi, so.maxCoeff());
    EXPECT_GE(so.minCoeff(), 0.68);
    EXPECT_LE(so.maxCoeff(), 1.2025);
  }
  std::printf("[ band     ] NS5 singular values of random rectangular inputs: [%.3f, %.3f]\n", lo, hi);
}

// ------------------------------------------------------------------------------- the grouped step

// A small store laid out like a model: a wide and a tall matrix (matrix group), a norm gain, the
// embedding and an untied head (Adam group).
template <class T> ParamStore<T> small_store() {
  ParamStore<T> ps;
  ps.add("model.embed_tokens.weight", {7, 4}, Init::Normal, 0.5);
  ps.add("model.layers.0.self_attn.q_proj.weight", {3, 5}, Init::Normal, 0.5);
  ps.add("model.layers.0.mlp.up_proj.weight", {6, 4}, Init::Normal, 0.5);
  ps.add("model.norm.weight", {4}, Init::Normal, 0.5);
  ps.add("lm_head.weight", {7, 4}, Init::Normal, 0.5);
  ps.finalize();
  ps.init(11);
  return ps;
}

/// The reference state of one tensor, in double.
struct RefTensor {
  Mat w, m, v, row_v;
};

struct GroupedCase {
  MuonVariant variant;
  double lr = 3e-3, matrix_lr = 2e-2;
  AdamWConfig adam;
  MuonConfig muon;
};

/// Runs `steps` grouped updates (gradients drawn per step) on a store of T and the equations in double
/// on a copy; returns the worst relative error over every value, momentum, second moment and row moment.
template <class T> double grouped_vs_reference(MuonVariant variant, int steps) {
  GroupedCase c;
  c.variant = c.muon.variant = variant;
  c.muon.weight_decay = 0.1;  // large enough that the decay term is visible against 1e-12
  c.adam.weight_decay = 0.05;
  ParamStore<T> ps = small_store<T>();
  std::vector<RefTensor> ref;
  for (const auto& s : ps.specs()) {
    RefTensor r;
    r.w.assign(ps.values() + s.offset, ps.values() + s.offset + s.size);
    r.m.assign(s.size, 0.0), r.v.assign(s.size, 0.0), r.row_v.assign(std::size_t(s.shape[0]), 0.0);
    ref.push_back(r);
  }
  MuonWorkspace<CpuBackend<T>> ws;
  double worst = 0;
  for (int t = 1; t <= steps; ++t) {
    Rng rng(1000 + t);
    for (std::size_t i = 0; i < ps.size(); ++i) ps.grads()[i] = T(rng.normal(0.0, 0.1 * t));
    grouped_update(ps, c.adam, c.lr, c.muon, c.matrix_lr, ws);
    for (std::size_t k = 0; k < ps.specs().size(); ++k) {
      const ParamSpec& s = ps.specs()[k];
      RefTensor& r = ref[k];
      Mat g(ps.grads() + s.offset, ps.grads() + s.offset + s.size);
      if (param_group(s) == ParamGroup::Adam) {  // AdamW (Loshchilov & Hutter), bias-corrected
        const double b1 = c.adam.beta1, b2 = c.adam.beta2, wd = s.shape.size() >= 2 ? c.adam.weight_decay : 0.0;
        for (std::size_t i = 0; i < s.size; ++i) {
          r.m[i] = b1 * r.m[i] + (1 - b1) * g[i];
          r.v[i] = b2 * r.v[i] + (1 - b2) * g[i] * g[i];
          const double mh = r.m[i] / (1 - std::pow(b1, t)), vh = r.v[i] / (1 - std::pow(b2, t));
          r.w[i] -= c.lr * (mh / (std::sqrt(vh) + c.adam.eps) + wd * r.w[i]);
        }
        worst = std::max({worst, rel(ps.values() + s.offset, r.w), rel(ps.adam_m() + s.offset, r.m), rel(ps.adam_v() + s.offset, r.v)});
        continue;
      }
      const int R = int(s.shape[0]), C = int(s.shape[1]);
      const double beta = c.muon.momentum, lr = c.matrix_lr, wd = c.muon.weight_decay;
      for (std::size_t i = 0; i < s.size; ++i) r.m[i] = beta * r.m[i] + (1 - beta) * g[i];
      Mat upd;
      if (c.variant == MuonVariant::Muon) {  // Nesterov look-ahead, NS5, sqrt(max(1, R/C))
        Mat u(s.size);
        for (std::size_t i = 0; i < s.size; ++i) u[i] = beta * r.m[i] + (1 - beta) * g[i];
        upd = ns_reference(u, R, C, c.muon.ns_steps);
        for (double& x : upd) x *= lr * std::sqrt(std::max(1.0, double(R) / C));
      } else {  // NS5 of the momentum, the row second moment, the division, the RMS rescaling
        upd = ns_reference(r.m, R, C, c.muon.ns_steps);
        for (int i = 0; i < R; ++i) {
          double ms = 0;
          for (int j = 0; j < C; ++j) ms += upd[std::size_t(i) * C + j] * upd[std::size_t(i) * C + j];
          r.row_v[i] = c.muon.beta2 * r.row_v[i] + (1 - c.muon.beta2) * ms / C;
          for (int j = 0; j < C; ++j) upd[std::size_t(i) * C + j] /= std::sqrt(r.row_v[i]) + c.muon.eps;
        }
        double nrm = 0;
        for (double x : upd) nrm += x * x;
        for (double& x : upd) x *= 0.2 * lr * std::sqrt(double(R) * C) / std::sqrt(nrm);
        worst = std::max(worst, rel(ps.row_moments() + s.row_offset, r.row_v));
      }
      for (std::size_t i = 0; i < s.size; ++i) r.w[i] = r.w[i] - lr * wd * r.w[i] - upd[i];
      worst = std::max({worst, rel(ps.values() + s.offset, r.w), rel(ps.adam_m() + s.offset, r.m)});
      // the matrices' adam_v is not Muon's: it stays zero
      for (std::size_t i = 0; i < s.size; ++i) EXPECT_EQ(ps.adam_v()[s.offset + i], T(0)) << s.name;
    }
  }
  EXPECT_EQ(ps.step, steps) << "one counter for both groups";
  return worst;
}

// Relative tolerances: double 1e-11 (Newton-Schulz's GEMMs reassociate sums), float 2e-5 (five NS steps of
// float GEMMs on a tensor of 15-24 elements).
TEST(Muon, OneStepMatchesTheEquations) {
  EXPECT_LT(grouped_vs_reference<double>(MuonVariant::Muon, 1), 1e-11);
  EXPECT_LT(grouped_vs_reference<float>(MuonVariant::Muon, 1), 2e-5);
}
TEST(Muon, ThreeStepsMatchTheEquations) {
  EXPECT_LT(grouped_vs_reference<double>(MuonVariant::Muon, 3), 1e-11);
}
TEST(NorMuon, TwoStepsWithWeightDecayMatchTheEquations) {
  EXPECT_LT(grouped_vs_reference<double>(MuonVariant::NorMuon, 2), 1e-11);
  EXPECT_LT(grouped_vs_reference<float>(MuonVariant::NorMuon, 2), 2e-5);
}

// The update's RMS is 0.2 lr (the paper's lr_hat), whatever the matrix's shape and the gradient's scale.
TEST(NorMuon, UpdateRmsIsPointTwoLr) {
  for (double scale : {1e-6, 1.0, 1e3}) {
    ParamStore<double> ps = small_store<double>();
    const std::vector<double> before(ps.values(), ps.values() + ps.size());
    Rng rng(5);
    for (std::size_t i = 0; i < ps.size(); ++i) ps.grads()[i] = scale * rng.normal();
    MuonConfig mc;
    mc.weight_decay = 0;
    MuonWorkspace<CpuBackend<double>> ws;
    grouped_update(ps, AdamWConfig{}, 0.0, mc, 1e-2, ws);
    for (const auto& s : ps.specs()) {
      if (param_group(s) != ParamGroup::Matrix) continue;
      double ss = 0;
      for (std::size_t i = 0; i < s.size; ++i) ss += std::pow(ps.values()[s.offset + i] - before[s.offset + i], 2);
      EXPECT_NEAR(std::sqrt(ss / double(s.size)), 0.2 * 1e-2, 1e-12) << s.name << " gradient scale " << scale;
    }
  }
}

// A matrix whose gradient (and momentum) is zero, e.g. the fuser before feedback starts: only the decay
// applies, exactly (W (1 - lr wd)), and nothing becomes NaN; its row moments stay zero.
TEST(NorMuon, ZeroGradientOnlyDecays) {
  for (MuonVariant v : {MuonVariant::NorMuon, MuonVariant::Muon}) {
    ParamStore<double> ps = small_store<double>();
    const std::vector<double> before(ps.values(), ps.values() + ps.size());
    ps.zero_grad();
    MuonConfig mc;
    mc.variant = v, mc.weight_decay = 0.5;
    MuonWorkspace<CpuBackend<double>> ws;
    grouped_update(ps, AdamWConfig{}, 1e-3, mc, 0.1, ws);
    for (const auto& s : ps.specs()) {
      if (param_group(s) != ParamGroup::Matrix) continue;
      for (std::size_t i = 0; i < s.size; ++i) EXPECT_EQ(ps.values()[s.offset + i], before[s.offset + i] * double(1.0 - 0.1 * 0.5)) << s.name;
      if (v == MuonVariant::NorMuon) {
        for (long r = 0; r < s.shape[0]; ++r) EXPECT_EQ(ps.row_moments()[s.row_offset + r], 0.0);
      }
    }
  }
}

TEST(Muon, BadSettingsAreRefused) {
  ParamStore<float> ps = small_store<float>();
  MuonWorkspace<CpuBackend<float>> ws;
  auto refused = [&](MuonConfig mc, double lr, const std::string& what) {
    try {
      grouped_update(ps, AdamWConfig{}, 1e-3, mc, lr, ws);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  MuonConfig mc;
  mc.momentum = 1.0;
  refused(mc, 1e-2, "momentum");
  mc = MuonConfig{}, mc.beta2 = -0.1;
  refused(mc, 1e-2, "beta2");
  mc = MuonConfig{}, mc.ns_steps = 0;
  refused(mc, 1e-2, "ns_steps");
  refused(MuonConfig{}, std::nan(""), "lr");
  // NorMuon over an OptimState without the row moments
  CpuBackend<float> be;
  const long step0 = ps.step;
  EXPECT_THROW(muon_update(be, optim_state(ps), MuonConfig{}, 1e-2, ws), Error);
  EXPECT_EQ(ps.step, step0);
}

// ------------------------------------------------------------------------------- parameter groups

// On the name tables of real models (every built-in fuser, tied and untied): the attention and MLP
// projections and the fuser's matrices are the matrix group; the embedding, the LM head, every norm
// gain and the gated_add bias are Adam's.
TEST(ParamGroups, RealModelNameTables) {
  for (const char* fuser : {"glu", "gated_add", "concat", "none"})
    for (bool tied : {true, false}) {
      ModelConfig c = fbt_test::tiny_config(fuser);
      c.tie_word_embeddings = tied, c.qk_norm = true;
      with_model<float>(c, [&](auto tag) {
        using M = typename decltype(tag)::type;
        M m(c, 1);
        int matrices = 0;
        for (const auto& s : m.params.specs()) {
          SCOPED_TRACE(std::string(fuser) + " " + s.name);
          const bool proj = s.name.find("_proj.weight") != std::string::npos;
          const bool fuser_matrix = s.name.find("model.feedback.w_") != std::string::npos && s.name.find(".weight") != std::string::npos;
          const bool want_matrix = proj || fuser_matrix;
          EXPECT_EQ(param_group(s), want_matrix ? ParamGroup::Matrix : ParamGroup::Adam);
          if (want_matrix) {
            EXPECT_EQ(s.shape.size(), 2u);
          }
          matrices += want_matrix;
        }
        // 7 projections per layer (q, k, v, o, gate, up, down) plus the fuser's matrices
        const int fuser_matrices = std::string(fuser) == "glu" ? 2 : std::string(fuser) == "gated_add" ? 2 : std::string(fuser) == "concat" ? 1 : 0;
        EXPECT_EQ(matrices, 7 * c.num_hidden_layers + fuser_matrices) << fuser;
        EXPECT_EQ(param_group(m.params.spec("model.embed_tokens.weight")), ParamGroup::Adam);
        if (!tied) {
          EXPECT_EQ(param_group(m.params.spec("lm_head.weight")), ParamGroup::Adam);
        }
        EXPECT_EQ(param_group(m.params.spec("model.norm.weight")), ParamGroup::Adam);
        EXPECT_EQ(param_group(m.params.spec("model.layers.0.self_attn.q_norm.weight")), ParamGroup::Adam);
        EXPECT_EQ(param_group(m.params.spec("model.layers.1.mlp.down_proj.weight")), ParamGroup::Matrix);
        return 0;
      });
    }
}

// The row-moment buffer: one value per row of each matrix (rank >= 2), in spec order, allocated only
// when asked for.
TEST(ParamGroups, RowMomentLayout) {
  ParamStore<float> ps = small_store<float>();
  EXPECT_EQ(ps.row_moments_size(), std::size_t(7 + 3 + 6 + 7));
  EXPECT_EQ(ps.spec("model.layers.0.self_attn.q_proj.weight").row_offset, 7u);
  EXPECT_EQ(ps.spec("model.layers.0.mlp.up_proj.weight").row_offset, 10u);
  EXPECT_EQ(ps.spec("lm_head.weight").row_offset, 16u);
  EXPECT_FALSE(ps.has_row_moments());
  const std::size_t before = ps.allocated_bytes();
  EXPECT_EQ(ps.row_moments()[22], 0.f);
  EXPECT_TRUE(ps.has_row_moments());
  EXPECT_EQ(ps.allocated_bytes(), before + 23 * sizeof(float));
}

}  // namespace

}  // namespace test_train_muon
