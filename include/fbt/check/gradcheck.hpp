// fbt/check/gradcheck.hpp: central finite differences of the K-pass objective against the library's
// backward, for every parameter tensor of a model: how a researcher checks a fuser, a tap or a block of
// their own (the library's own layers are checked the same way in tests/).
//
//   fbt::Model<double, MyFuser<double>> m(cfg, 1);             // double: the check needs the precision
//   fbt::perturb_parameters(m.params, 2);                      // away from the init (identities, zeros, ones)
//   fbt::StepOptions o; o.K = 3;                               // the whole chain, gradients through all passes
//   auto r = fbt::check_step_gradients(m, batch, o);
//   std::printf("%s\n", r.str().c_str());                      // one line per tensor, the worst first
//   if (!r.ok(1e-6)) return 1;
// Error measure: the normwise relative error ||g - g_fd|| / max(||g||, ||g_fd||, 1e-12) per tensor, with
// g_fd[i] = (f(x + h e_i) - f(x - h e_i)) / 2h, h = 1e-5. In double a correct backward gives ~1e-9; a
// wrong term gives 1e-2 or more. With sigma > 0 every evaluation draws the same jitter (the Rng is
// restored), so the objective stays a smooth function of the parameters.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../model/multipass.hpp"
#include "grad_report.hpp"

namespace fbt {

/// \brief Central differences of f (which reads x, perturbed here in place) against grad, over n
/// elements of x (a stride > 1 samples every stride-th).
inline GradCheck check_gradient(const std::function<double()>& f, double* x, const double* grad, std::size_t n, double h = 1e-5,
                                std::size_t stride = 1) {
  double diff2 = 0, a2 = 0, n2 = 0, mx = 0;
  for (std::size_t i = 0; i < n; i += stride) {
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

/// \brief Moves every parameter away from its init, so that no gradient is zero or tiny by symmetry
/// (W_U = I, W_s = 0, gains = 1 at init): gains and biases (rank 1) 1 + N(0, 0.2^2), matrices N(0, 0.3^2).
/// At the init's small weights some gradients are ~1e-5, where central differences lose digits.
template <class T> void perturb_parameters(ParamStore<T>& ps, std::uint64_t seed) {
  Rng rng(seed);
  for (const auto& s : ps.specs()) {
    T* p = ps.values() + s.offset;
    for (std::size_t i = 0; i < s.size; ++i) p[i] = T(s.shape.size() == 1 ? 1.0 + 0.2 * rng.normal() : 0.3 * rng.normal());
  }
}

/// \brief Checks the gradient multipass_step accumulates for every parameter tensor of m (a double
/// model) against central differences of the step's objective sum_j weight_j L_j. Options as for the
/// step (K, lambda, sigma with its Rng, prefix, documents); detach and grad_passes define other
/// objectives and are refused here. max_per_tensor > 0 samples that many elements per tensor.
template <class M> StepGradReport check_step_gradients(M& m, const Batch& b, StepOptions o, std::size_t max_per_tensor = 0, double h = 1e-5) {
  static_assert(std::is_same<typename M::Scalar, double>::value, "check_step_gradients needs a double model (finite differences in double)");
  FBT_ASSERT(!o.detach && o.grad_passes == 0, "check_step_gradients: detach and grad_passes change the objective; check them with K passes of your own");
  Workspace<M> ws;
  const Rng rng0 = o.rng ? *o.rng : Rng(0);
  Rng rng = rng0;
  if (o.rng) o.rng = &rng;
  auto objective = [&] {
    rng = rng0;
    StepOptions f = o;
    f.backward = false;
    return multipass_step(m, ws, b, f).objective;
  };
  m.params.zero_grad();
  rng = rng0;
  multipass_step(m, ws, b, o);
  const std::vector<double> grad(m.params.grads(), m.params.grads() + m.params.size());
  StepGradReport rep;
  for (const auto& s : m.params.specs()) {
    const std::size_t stride = max_per_tensor > 0 ? std::max<std::size_t>(1, s.size / max_per_tensor) : 1;
    rep.rows.push_back({s.name, check_gradient(objective, m.params.values() + s.offset, grad.data() + s.offset, s.size, h, stride)});
  }
  return rep;
}

}  // namespace fbt
