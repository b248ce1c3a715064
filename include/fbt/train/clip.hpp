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

#include "../core/params.hpp"

namespace fbt {

/// \brief Global L2 norm sqrt(sum_i g_i^2) over every gradient in the store.
///
/// The squares are accumulated in double in flat-index order (deterministic, and exact enough for
/// float gradients). Returns NaN or inf when a gradient is non-finite or the sum overflows.
/// \tparam T float or double
/// \param ps a finalized store; its grads() are read only
template <class T> double grad_global_norm(const ParamStore<T>& ps) {
  const T* g = ps.grads();
  double sum_sq = 0.0;
  for (std::size_t i = 0; i < ps.size(); ++i) sum_sq += double(g[i]) * double(g[i]);
  return std::sqrt(sum_sq);
}

/// \brief Clip the global gradient norm to max_norm in place; returns the norm *before* clipping.
///
/// With norm = grad_global_norm(ps): if norm is finite, max_norm > 0 and norm > max_norm, every
/// gradient becomes g * (max_norm / (norm + 1e-6)) (computed in double, rounded to T once), so the
/// new norm is just under max_norm. Otherwise nothing changes: max_norm <= 0 disables clipping, and
/// a NaN/inf norm is returned unchanged for the trainer to detect and stop on.
/// \tparam T float or double
/// \param ps        a finalized store; its grads() may be rescaled
/// \param max_norm  the clipping threshold (<= 0: no clipping)
template <class T> double clip_grad_norm(ParamStore<T>& ps, double max_norm) {
  const double norm = grad_global_norm(ps);
  if (!std::isfinite(norm) || !(max_norm > 0.0) || !(norm > max_norm)) return norm;
  const double scale = max_norm / (norm + 1e-6);  // PyTorch clip_grad_norm_'s clip_coef
  T* g = ps.grads();
  for (std::size_t i = 0; i < ps.size(); ++i) g[i] = T(double(g[i]) * scale);
  return norm;
}

}  // namespace fbt
