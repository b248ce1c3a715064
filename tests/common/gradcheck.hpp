// tests/common/gradcheck.hpp: central finite differences in double, shared by every gradient test.
//
// Error measure (used by every FD test in fbt): the normwise relative error
//     err = ||g_analytic - g_fd||_2 / max(||g_analytic||_2, ||g_fd||_2, 1e-12)
// with g_fd[i] = (f(x + h e_i) - f(x - h e_i)) / (2h), h = 1e-5 by default. In double the truncation
// error is O(h^2) and the round-off O(1e-16 / h), so a correct backward gives err ~ 1e-9; tests require
// err < 1e-6 (the brief's bound), and a wrong term in a backward gives err ~ 1e-2 or more.
#pragma once

#include <cmath>
#include <functional>
#include <vector>

#include "fbt/check/gradcheck.hpp"
#include "fbt/core/rng.hpp"
#include "fbt/core/tensor.hpp"

namespace fbt_test {

// The checker itself is the library's (fbt/check/gradcheck.hpp), the one researchers use on their own layers.
using fbt::check_gradient;
using fbt::GradCheck;

/// Fill with N(0, std^2) from a seeded fbt::Rng.
template <class T> void randn(T* p, std::size_t n, fbt::Rng& rng, double std = 1.0, double mean = 0.0) {
  for (std::size_t i = 0; i < n; ++i) p[i] = T(rng.normal(mean, std));
}

/// A (rows, cols) row-major matrix of N(0, 1) floats from a seeded fbt::Rng.
inline fbt::RowMat<float> randn_matrix(long rows, long cols, std::uint64_t seed) {
  fbt::Rng g(seed);
  fbt::RowMat<float> m(rows, cols);
  for (long i = 0; i < m.size(); ++i) m.data()[i] = float(g.normal());
  return m;
}

/// A fixed random linear functional of an output: f = sum_i w_i y_i, so d f / d y = w (a generic upstream gradient).
inline std::vector<double> random_weights(std::size_t n, std::uint64_t seed) {
  fbt::Rng rng(seed);
  std::vector<double> w(n);
  for (auto& v : w) v = rng.normal();
  return w;
}

}  // namespace fbt_test
