// fbt/ops/rmsnorm.hpp: RMSNorm (Zhang & Sennrich 2019), as in Llama/Qwen3.
//
//   rstd_n = 1 / sqrt(mean_c x_nc^2 + eps),   xhat = x * rstd,   y = xhat * w
// Backward (per row; `dxhat = dy * w`):
//   dw += sum_n dy * xhat
//   dx += rstd * (dxhat - xhat * mean_c(dxhat * xhat))
// The same kernel normalises each attention head (Qwen3 QK-norm): view (BT, NH*hs) as (BT*NH, hs).
#pragma once

#include <cmath>

#include "../core/tensor.hpp"

namespace fbt {

/// \brief out = rmsnorm(inp) * w.  out, inp (N, C); rstd (N); w (C).
template <class T> void rmsnorm_forward(RowMapS<T> out, Span<T> rstd, CRowMapS<T> inp, CSpan<T> w, T eps) {
  FBT_ASSERT(out.rows() == inp.rows() && out.cols() == inp.cols() && w.size() == inp.cols() && rstd.size() == inp.rows(),
             "rmsnorm_forward: shape mismatch");
  const Eigen::Index C = inp.cols();
  for (Eigen::Index n = 0; n < inp.rows(); ++n) {
    const T r = T(1) / std::sqrt(inp.row(n).squaredNorm() / T(C) + eps);
    rstd[n] = r;
    out.row(n) = (inp.row(n) * r).cwiseProduct(w.transpose());
  }
}

/// \brief Accumulates dinp (N, C) and dw (C); needs rstd from the forward of the same inp.
/// A null-data dw skips the gain gradient.
template <class T>
void rmsnorm_backward(RowMapS<T> dinp, Span<T> dw, CRowMapS<T> dout, CRowMapS<T> inp, CSpan<T> w, CSpan<T> rstd) {
  FBT_ASSERT(dinp.rows() == inp.rows() && dinp.cols() == inp.cols() && dout.rows() == inp.rows() && dout.cols() == inp.cols(),
             "rmsnorm_backward: shape mismatch");
  const Eigen::Index C = inp.cols();
  const auto W = w.transpose().array();  // (1, C)
  for (Eigen::Index n = 0; n < inp.rows(); ++n) {
    const T r = rstd[n];
    const auto x = inp.row(n).array();
    const auto dy = dout.row(n).array();
    // first: the reduction sum_c dxhat * xhat (dxhat = dy * w, xhat = x * rstd), and dw += dy * xhat
    const T proj = (dy * W * x).sum() * r / T(C);
    if (dw.data() != nullptr) dw.transpose().array() += dy * x * r;
    // then: dx += rstd * (dxhat - xhat * proj)
    dinp.row(n).array() += r * (dy * W - x * (r * proj));
  }
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_RMSNORM_INSTANTIATE(EXTERN, T) \
  EXTERN template void rmsnorm_forward<T>(RowMapS<T>, Span<T>, CRowMapS<T>, CSpan<T>, T); \
  EXTERN template void rmsnorm_backward<T>(RowMapS<T>, Span<T>, CRowMapS<T>, CRowMapS<T>, CSpan<T>, CSpan<T>);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_RMSNORM_INSTANTIATE(extern, float)
FBT_OPS_RMSNORM_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
