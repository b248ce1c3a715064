// course/instructor/solutions/gated_residual.hpp: the REFERENCE SOLUTION of exercise E5 (docs/course/04-fuser-lab.md),
// the gated residual fuser, fuser "gated_residual":
//
//     z = W_g [s; e]            W_g (D, 2D): its left half W_gs acts on s, its right half W_ge on e
//     g = sigmoid(z)            the gate, (N, D)
//     a = W_s s                 W_s (D, D), the state's proposal, (N, D)
//     u = e + g * a             (* elementwise)
//
// Backward (upstream du (N, D); every gradient ACCUMULATES):
//     de += du                                  the residual path
//     da  = du * g,   dz = du * a * g (1 - g)   through the product and the sigmoid
//     dW_s += da^T s,  ds += da W_s             a = W_s s
//     dW_g[:, :D] += dz^T s,  ds += dz W_gs     z's state half
//     dW_g[:, D:] += dz^T e,  de += dz W_ge     z's embedding half
// Init: W_g ~ N(0, initializer_range^2), W_s = 0 (the model starts as the plain one, gate near 1/2).
// Read it only after trying exercises/gated_residual.hpp.
#pragma once

#include <cmath>
#include <cstddef>

#include "fbt/layers/fuser.hpp"

namespace fbt_course {

template <class T> struct GatedResidualFuser {
  using Scalar = T;
  static constexpr const char* name = "gated_residual";  // the config's `fuser` value
  int D = 0;
  double init_std = 0.02;
  std::size_t w_g = 0, w_s = 0;  // offsets of W_g (D, 2D) and W_s (D, D) in the flat parameter store

  struct Cache {
    T* a;   // (N, D)  W_s s                            (keep: backward reads it)
    T* g;   // (N, D)  sigmoid(W_g [s; e])              (keep)
    T* da;  // (N, D)  backward's scratch: dLoss/da     (temp)
    T* dz;  // (N, D)  backward's scratch: dLoss/dz     (temp)
  };

  GatedResidualFuser() = default;
  explicit GatedResidualFuser(const fbt::FuserArgs& args) : D(args.hidden_size), init_std(args.initializer_range) {}

  /// Parameters under model.feedback.: w_g.weight (D, 2D) ~ N(0, init_std^2), w_s.weight (D, D) = 0.
  void declare(const fbt::ParamRegistry<T>& r) {
    w_g = r.add("w_g.weight", {D, 2 * D}, fbt::Init::Normal, init_std);
    w_s = r.add("w_s.weight", {D, D}, fbt::Init::Zeros);
  }

  template <class Be> void alloc(const Be&, fbt::Carver<T>& keep, fbt::Carver<T>& temp, Cache& c, int N, bool grad) const {
    const std::size_t ND = std::size_t(N) * D;
    c.a = keep.take(ND), c.g = keep.take(ND);
    c.da = c.dz = nullptr;
    if (grad) c.da = temp.take(ND), c.dz = temp.take(ND);
  }

  /// u (N, D) = e + sigmoid(W_g [s; e]) * (W_s s).
  template <class Be>
  void forward(Be& be, const fbt::Weights<T>& w, Cache& c, const T* s, const T* e, const T* /*pre*/, T* u, int N) const {
    const std::size_t ND = std::size_t(N) * D;
    fbt::linear(be, c.g, s, w.value + w_g, N, D, D, 2 * D, false);     // z  = s W_gs^T      (N, D)
    fbt::linear(be, c.g, e, w.value + w_g + D, N, D, D, 2 * D, true);  // z += e W_ge^T      (N, D)
    fbt::linear(be, c.a, s, w.value + w_s, N, D, D, D, false);         // a  = s W_s^T       (N, D)
    for (std::size_t i = 0; i < ND; ++i) {
      c.g[i] = T(1) / (T(1) + std::exp(-c.g[i]));  // g = sigmoid(z), in place
      u[i] = e[i] + c.g[i] * c.a[i];
    }
  }

  /// See the header: de += du + dz W_ge;  ds += da W_s + dz W_gs (skipped when ds is null: detached);
  /// dW_s += da^T s;  dW_g += dz^T [s; e].
  template <class Be>
  void backward(Be& be, const fbt::Weights<T>& w, const Cache& c, const T* s, const T* e, const T* /*pre*/, const T* du, T* ds, T* de,
                T* /*dpre*/, int N) const {
    const std::size_t ND = std::size_t(N) * D;
    for (std::size_t i = 0; i < ND; ++i) {
      de[i] += du[i];                                      // u = e + ...
      c.da[i] = du[i] * c.g[i];                            // dLoss/da     (N, D)
      c.dz[i] = du[i] * c.a[i] * c.g[i] * (T(1) - c.g[i]);  // dLoss/dz     (N, D)
    }
    fbt::linear_backward(be, ds, w.grad + w_s, c.da, s, w.value + w_s, N, D, D, D);              // a = W_s s
    fbt::linear_backward(be, ds, w.grad + w_g, c.dz, s, w.value + w_g, N, D, D, 2 * D);          // z: state half
    fbt::linear_backward(be, de, w.grad + w_g + D, c.dz, e, w.value + w_g + D, N, D, D, 2 * D);  // z: embedding half
  }

  /// Optional: ||u - e|| / ||e|| over the fed-back rows (the trainer logs it).
  template <class Be> fbt::FuserStats diagnostics(Be& be, const fbt::Weights<T>&, const Cache&, const fbt::FuserPass<T>& p) const {
    return fbt::feedback_ratio(be, p, p.e, D);
  }
};

}  // namespace fbt_course
