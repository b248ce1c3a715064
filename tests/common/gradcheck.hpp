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

#include "fbt/core/rng.hpp"

namespace fbt_test {

struct GradCheck {
  double err = 0;      ///< normwise relative error
  double max_abs = 0;  ///< max |analytic - fd|
  double norm = 0;     ///< ||fd||_2 (a check against an all-zero gradient)
};

/// f() reads x (which the check perturbs in place); grad is the analytic gradient of f at x.
inline GradCheck check_gradient(const std::function<double()>& f, double* x, const double* grad, std::size_t n, double h = 1e-5) {
  double diff2 = 0, a2 = 0, n2 = 0, mx = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f();
    x[i] = x0 - h;
    const double fm = f();
    x[i] = x0;
    const double fd = (fp - fm) / (2 * h);
    diff2 += (grad[i] - fd) * (grad[i] - fd);
    a2 += grad[i] * grad[i];
    n2 += fd * fd;
    mx = std::max(mx, std::abs(grad[i] - fd));
  }
  GradCheck r;
  r.err = std::sqrt(diff2) / std::max({std::sqrt(a2), std::sqrt(n2), 1e-12});
  r.max_abs = mx;
  r.norm = std::sqrt(n2);
  return r;
}

/// Fill with N(0, std^2) from a seeded fbt::Rng.
template <class T> void randn(T* p, std::size_t n, fbt::Rng& rng, double std = 1.0, double mean = 0.0) {
  for (std::size_t i = 0; i < n; ++i) p[i] = T(rng.normal(mean, std));
}

/// A fixed random linear functional of an output: f = sum_i w_i y_i, so d f / d y = w (a generic upstream gradient).
inline std::vector<double> random_weights(std::size_t n, std::uint64_t seed) {
  fbt::Rng rng(seed);
  std::vector<double> w(n);
  for (auto& v : w) v = rng.normal();
  return w;
}

}  // namespace fbt_test
