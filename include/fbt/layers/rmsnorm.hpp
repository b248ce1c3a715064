// fbt/layers/rmsnorm.hpp: an RMSNorm with a learnable gain, as a layer (Zhang & Sennrich 2019; ops/rmsnorm.hpp).
//
//   y = x / sqrt(mean(x^2) + eps) * g          x, y (R, C); g (C), declared as "<scope>weight"
// Used for the blocks' norms, the final norm, Qwen3's per-head QK-norm (R = N * heads, C = head_dim), the
// feedback input norm N_in and the fusers' N_g / N_s.
#pragma once

#include "common.hpp"

namespace fbt {

template <class T> struct RMSNorm {
  using Scalar = T;
  int C = 0;           ///< normalised width
  T eps = T(1e-6);
  std::size_t g = 0;   ///< offset of the gain (C)

  RMSNorm() = default;
  RMSNorm(int width, double rms_norm_eps) : C(width), eps(T(rms_norm_eps)) { FBT_ASSERT(width > 0, "RMSNorm: width must be > 0"); }

  /// Registers "<scope>weight" (C), initialised to ones (or to `gain`: knob in_norm_init).
  void declare(const ParamRegistry<T>& r, double gain = 1.0) {
    g = gain == 1.0 ? r.add("weight", {C}, Init::Ones) : r.add("weight", {C}, Init::Constant, gain);
  }

  /// \brief out (R, C) = norm(x) * g; rstd (R) for backward. out may be x.
  template <class Be> void forward(Be& be, const Weights<T>& w, T* out, T* rstd, const T* x, int R) const {
    be.rmsnorm_forward(out, rstd, x, w.value + g, R, C, eps);
  }
  /// \brief dx (R, C) += J^T dy; the gain's gradient is accumulated (when w.grad is set).
  template <class Be> void backward(Be& be, const Weights<T>& w, T* dx, const T* dy, const T* x, const T* rstd, int R) const {
    be.rmsnorm_backward(dx, w.grad ? w.grad + g : nullptr, dy, x, w.value + g, rstd, R, C);
  }
};

}  // namespace fbt
