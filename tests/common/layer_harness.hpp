// tests/common/layer_harness.hpp: helpers shared by the kernel (tests/ops) and layer (tests/layers) tests.
//
// - randn_vec / cast_vec / dot / max_scaled_diff: small buffer utilities (the float-vs-double forward
//   agreement uses max_scaled_diff = max_i |a_i - b_i| / max(1, max_i |b_i|), i.e. an absolute error
//   relative to the output scale).
// - randomize_store: moves every parameter away from its init like tests/common/tiny_model.hpp
//   (rank-1 tensors 1 + N(0, 0.2^2), matrices N(0, 0.3^2)), so no gradient is accidentally zero.
// - expect_store_grads: finite differences over every tensor of a ParamStore (one report line each)
//   and over the whole flat store, against an analytic gradient taken from ps.grads().
// - pass_tables: the pos / first tables of a PassShape, optionally with document boundaries.
// - LayerRig: one layer (any type with the layer contract) with its own ParamStore, scoped names and
//   cache, laid out for (B, T) on the CPU backend.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "fbt/backend/cpu.hpp"
#include "fbt/core/params.hpp"
#include "fbt/layers/common.hpp"
#include "gradcheck.hpp"

namespace fbt_test {

inline std::vector<double> randn_vec(std::size_t n, std::uint64_t seed, double std = 1.0, double mean = 0.0) {
  fbt::Rng rng(seed);
  std::vector<double> v(n);
  randn(v.data(), n, rng, std, mean);
  return v;
}

template <class To, class From> std::vector<To> cast_vec(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

/// sum_i w_i y_i in double, the scalar every gradient check differentiates.
template <class T> double dot(const std::vector<double>& w, const T* y) {
  double s = 0;
  for (std::size_t i = 0; i < w.size(); ++i) s += w[i] * double(y[i]);
  return s;
}

/// max_i |a_i - b_i| / max(1, max_i |b_i|) (b is the double reference).
template <class A, class B> double max_scaled_diff(const A* a, const B* b, std::size_t n) {
  double d = 0, s = 1;
  for (std::size_t i = 0; i < n; ++i) {
    d = std::max(d, std::abs(double(a[i]) - double(b[i])));
    s = std::max(s, std::abs(double(b[i])));
  }
  return d / s;
}
template <class A, class B> double max_scaled_diff(const std::vector<A>& a, const std::vector<B>& b) {
  EXPECT_EQ(a.size(), b.size());
  return max_scaled_diff(a.data(), b.data(), std::min(a.size(), b.size()));
}

/// Gains and biases (rank 1) -> 1 + N(0, 0.2^2), matrices -> N(0, 0.3^2).
template <class T> void randomize_store(fbt::ParamStore<T>& ps, std::uint64_t seed) {
  fbt::Rng rng(seed);
  for (const auto& s : ps.specs()) {
    T* p = ps.values() + s.offset;
    for (std::size_t i = 0; i < s.size; ++i) p[i] = T(s.shape.size() == 1 ? 1.0 + 0.2 * rng.normal() : 0.3 * rng.normal());
  }
}

/// Copy the values of one store into an identically declared store of another scalar type.
template <class To, class From> void copy_values(fbt::ParamStore<To>& dst, const fbt::ParamStore<From>& src) {
  ASSERT_EQ(dst.size(), src.size());
  for (std::size_t i = 0; i < src.size(); ++i) dst.values()[i] = To(src.values()[i]);
}

/// Central differences of f w.r.t. every tensor of ps (perturbing ps.values() in place), against grad
/// (a copy of ps.grads() taken after backward). Requires err < tol and a non-zero FD gradient for each
/// tensor, checks that the specs tile the store, and finally checks the whole flat store at once.
inline void expect_store_grads(fbt::ParamStore<double>& ps, const std::vector<double>& grad, const std::function<double()>& f,
                               const std::string& what, double tol = 1e-6) {
  ASSERT_EQ(grad.size(), ps.size());
  std::size_t covered = 0;
  for (const auto& s : ps.specs()) {
    const GradCheck r = check_gradient(f, ps.values() + s.offset, grad.data() + s.offset, s.size);
    std::printf("  %-20s %-44s rel err %.3g  |g_fd| %.3g\n", what.c_str(), s.name.c_str(), r.err, r.norm);
    EXPECT_LT(r.err, tol) << what << ": " << s.name << " max_abs " << r.max_abs;
    EXPECT_GT(r.norm, 1e-8) << what << ": " << s.name << " has a zero gradient";
    covered += s.size;
  }
  EXPECT_EQ(covered, ps.size());
  const GradCheck all = check_gradient(f, ps.values(), grad.data(), ps.size());
  std::printf("  %-20s %-44s rel err %.3g  |g_fd| %.3g\n", what.c_str(), "(whole store)", all.err, all.norm);
  EXPECT_LT(all.err, tol) << what << ": whole store";
}

/// One named FD check of an input buffer: prints and expects err < tol and a non-zero gradient.
inline GradCheck expect_input_grad(const std::function<double()>& f, double* x, const double* grad, std::size_t n,
                                   const std::string& what, double tol = 1e-6) {
  const GradCheck r = check_gradient(f, x, grad, n);
  std::printf("  %-40s rel err %.3g  |g_fd| %.3g\n", what.c_str(), r.err, r.norm);
  EXPECT_LT(r.err, tol) << what << " max_abs " << r.max_abs;
  EXPECT_GT(r.norm, 1e-8) << what << " has a zero gradient";
  return r;
}

/// pos / first tables (B*T) of a PassShape. doc_starts lists, per batch row, the positions t > 0 where
/// a new document starts: first[b, t] = start of t's document, pos[b, t] = t - first[b, t] (RoPE
/// restarts at a document start). With no starts: first = 0, pos = t.
struct PassTables {
  std::vector<int> pos, first;
};
inline PassTables pass_tables(int B, int Tn, const std::vector<std::vector<int>>& doc_starts = {}) {
  PassTables p;
  for (int b = 0; b < B; ++b) {
    int start = 0;
    for (int t = 0; t < Tn; ++t) {
      if (std::size_t(b) < doc_starts.size() && std::find(doc_starts[b].begin(), doc_starts[b].end(), t) != doc_starts[b].end()) start = t;
      p.first.push_back(start);
      p.pos.push_back(t - start);
    }
  }
  return p;
}

/// One layer with its own store (names under `scope`) and one pass's cache (keep + temporaries), on the
/// CPU backend. Not copyable: the cache points into its buffer.
template <class Layer> struct LayerRig {
  using T = typename Layer::Scalar;
  Layer layer;
  fbt::ParamStore<T> ps;
  fbt::CpuBackend<T> be;
  fbt::HostBuffer<T> mem;
  typename Layer::Cache cache{};
  PassTables tabs;
  int B, Tn;
  LayerRig(Layer l, const std::string& scope, int b, int t, PassTables tb, bool grad = true) : layer(std::move(l)), tabs(std::move(tb)), B(b), Tn(t) {
    layer.declare(fbt::ParamRegistry<T>(ps, scope));
    ps.finalize();
    fbt::lay_out_regions<T>(mem, [&](fbt::Regions<T>& r) {
      fbt::Carver<T> tmp = r.temp();
      layer.alloc(be, r.keep, tmp, cache, B, Tn, grad);
      r.done(tmp);
    });
  }
  LayerRig(const LayerRig&) = delete;
  int N() const { return B * Tn; }
  fbt::Weights<T> w() { return fbt::host_weights(ps); }
  fbt::PassShape shape() const { return fbt::PassShape{B, Tn, tabs.pos.data(), tabs.first.data()}; }
};

}  // namespace fbt_test
