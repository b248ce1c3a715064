// fbt/ops/softmax_xent.hpp: fused, numerically stable softmax cross-entropy (+ optional z-loss).
//
// Per row n with target y_n (a negative target is ignored):
//   lse_n  = m + log sum_v exp(l_nv - m),   m = max_v l_nv
//   loss_n = lse_n - l_{n y_n} + z * lse_n^2                        (z-loss: PaLM, Chowdhery et al. 2022)
//   dl_nv  = scale * (p_nv - [v = y_n] + 2 z lse_n p_nv),  p = softmax(l)
// forward turns the logits into probabilities in place (the llm.c fused kernel), backward turns those
// probabilities into dlogits in place, so one (N, V) buffer serves the whole loss.
#pragma once

#include <cmath>

#include "../core/tensor.hpp"
#include "vexp.hpp"

namespace fbt {

/// \brief logits (N, V) -> probabilities in place; losses (N) and lse (N) written (loss 0 when ignored).
/// Returns the sum of the losses over rows with a target >= 0, accumulated in double.
template <class T>
double softmax_xent_forward(RowMap<T> logits_to_probs, Span<T> losses, Span<T> lse, const int* targets, double z_loss = 0.0) {
  const Eigen::Index N = logits_to_probs.rows(), V = logits_to_probs.cols();
  FBT_ASSERT(losses.size() == N && lse.size() == N, "softmax_xent_forward: shape mismatch");
  double total = 0.0;
  for (Eigen::Index n = 0; n < N; ++n) {
    auto row = logits_to_probs.row(n);
    const int y = targets[n];
    FBT_ASSERT(y < V, "softmax_xent_forward: target " + std::to_string(y) + " outside the vocabulary of " + std::to_string(V));
    const T m = row.maxCoeff();
    const T ly = y >= 0 ? row[y] : T(0);
    row = vexp(row.array() - m).matrix();
    const T sum = row.sum();
    row /= sum;
    const T l = m + std::log(sum);
    lse[n] = l;
    losses[n] = y >= 0 ? T(l - ly + T(z_loss) * l * l) : T(0);
    if (y >= 0) total += double(losses[n]);
  }
  return total;
}

/// \brief probabilities (N, V) -> dlogits in place: scale * (p - onehot(y) + 2 z lse p); zero rows for ignored targets.
template <class T>
void softmax_xent_backward(RowMap<T> probs_to_dlogits, CSpan<T> lse, const int* targets, double scale, double z_loss = 0.0) {
  const Eigen::Index N = probs_to_dlogits.rows();
  for (Eigen::Index n = 0; n < N; ++n) {
    auto row = probs_to_dlogits.row(n);
    const int y = targets[n];
    if (y < 0) {
      row.setZero();
      continue;
    }
    row *= T(scale * (1.0 + 2.0 * z_loss * double(lse[n])));
    row[y] -= T(scale);
  }
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_SOFTMAX_XENT_INSTANTIATE(EXTERN, T) \
  EXTERN template double softmax_xent_forward<T>(RowMap<T>, Span<T>, Span<T>, const int*, double); \
  EXTERN template void softmax_xent_backward<T>(RowMap<T>, CSpan<T>, const int*, double, double);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_SOFTMAX_XENT_INSTANTIATE(extern, float)
FBT_OPS_SOFTMAX_XENT_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
