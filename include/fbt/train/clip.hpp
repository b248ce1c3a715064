// fbt/train/clip.hpp: global gradient-norm clipping over a flat ParamStore.
//
// The global L2 norm of all gradients together (not per tensor), as in PyTorch's
// torch.nn.utils.clip_grad_norm_ and llm.c's `global_norm`: if ||g|| > max_norm, every gradient is
// multiplied by max_norm / (||g|| + 1e-6) (the PyTorch formula; the 1e-6 guards tiny norms). This
// is the "gradient clipping" of Pascanu, Mikolov & Bengio 2013, "On the difficulty of training
// recurrent neural networks", section 3.2.
#pragma once

#include <cmath>
#include <cstddef>

#include "../backend/cpu.hpp"
#include "../core/params.hpp"

namespace fbt {

/// \brief Global L2 norm sqrt(sum_i g_i^2) over n gradients in backend memory.
///
/// The squares are accumulated in double (on the CPU in flat-index order: deterministic, and exact
/// enough for float gradients). Returns NaN or inf when a gradient is non-finite or the sum overflows.
template <class Be, class T> double grad_global_norm(Be& be, const T* grad, std::size_t n) { return std::sqrt(be.sum_squares(grad, n)); }

/// \brief Clip the global gradient norm to max_norm in place; returns the norm *before* clipping.
///
/// With norm = grad_global_norm: if norm is finite, max_norm > 0 and norm > max_norm, every gradient
/// becomes g * (max_norm / (norm + 1e-6)) (computed in double, rounded to T once), so the new norm is just
/// under max_norm. Otherwise nothing changes: max_norm <= 0 disables clipping, and a NaN/inf norm is
/// returned unchanged for the trainer to detect and stop on.
template <class Be, class T> double clip_grad_norm(Be& be, T* grad, std::size_t n, double max_norm) {
  const double norm = grad_global_norm(be, grad, n);
  if (!std::isfinite(norm) || !(max_norm > 0.0) || !(norm > max_norm)) return norm;
  be.scale(grad, max_norm / (norm + 1e-6), n);  // PyTorch clip_grad_norm_'s clip_coef
  return norm;
}

/// The same over a ParamStore's gradients, on the CPU.
template <class T> double grad_global_norm(const ParamStore<T>& ps) {
  CpuBackend<T> be;
  return grad_global_norm(be, ps.grads(), ps.size());
}
template <class T> double clip_grad_norm(ParamStore<T>& ps, double max_norm) {
  CpuBackend<T> be;
  return clip_grad_norm(be, ps.grads(), ps.size(), max_norm);
}

}  // namespace fbt
