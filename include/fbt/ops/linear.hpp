// fbt/ops/linear.hpp: the bias-free linear map y = x W^T (PyTorch nn.Linear layout), and a bias.
//
// W is (OC, C) row-major. Every view is strided (RowMapS) so a half of a (D, 2D) fuser matrix, or one
// head of a (BT, NH*hs) activation, is passed without a copy. Backward ACCUMULATES (llm.c convention):
//   dinp += dout W        (N, C)  = (N, OC) (OC, C)
//   dW   += dout^T inp    (OC, C) = (OC, N) (N, C)
#pragma once

#include "gemm.hpp"

namespace fbt {

/// \brief out = inp W^T.  out (N, OC), inp (N, C), w (OC, C).
template <class T> void linear_forward(RowMapS<T> out, CRowMapS<T> inp, CRowMapS<T> w) {
  FBT_ASSERT(inp.cols() == w.cols() && out.rows() == inp.rows() && out.cols() == w.rows(), "linear_forward: shape mismatch");
  if (inp.rows() == 1) {  // decoding one token: a matrix-vector product (W row-major: one dot product per output)
    out.row(0).transpose().noalias() = w * inp.row(0).transpose();
    return;
  }
  gemm(out, inp, false, w, true, false);
}

/// \brief out += inp W^T (accumulating form, for sums of projections).
template <class T> void linear_forward_acc(RowMapS<T> out, CRowMapS<T> inp, CRowMapS<T> w) {
  FBT_ASSERT(inp.cols() == w.cols() && out.rows() == inp.rows() && out.cols() == w.rows(), "linear_forward_acc: shape mismatch");
  if (inp.rows() == 1) {
    out.row(0).transpose().noalias() += w * inp.row(0).transpose();
    return;
  }
  gemm(out, inp, false, w, true, true);
}

/// An empty (null) strided view: passed where a kernel should skip a gradient.
template <class T> inline RowMapS<T> no_grad(Eigen::Index r, Eigen::Index c) { return RowMapS<T>(nullptr, r, c, Eigen::OuterStride<>(c)); }

/// \brief dinp += dout W; dw += dout^T inp. Pass a null-data dinp or dw (no_grad) to skip that gradient.
template <class T>
void linear_backward(RowMapS<T> dinp, RowMapS<T> dw, CRowMapS<T> dout, CRowMapS<T> inp, CRowMapS<T> w) {
  FBT_ASSERT(dout.cols() == w.rows() && inp.cols() == w.cols() && dout.rows() == inp.rows(), "linear_backward: shape mismatch");
  if (dinp.data() != nullptr) gemm(dinp, dout, false, w, false, true);
  if (dw.data() != nullptr) gemm(dw, dout, true, inp, false, true);
}

/// \brief out (N, OC) += b (OC) on every row.
template <class T> void bias_forward(RowMapS<T> out, CSpan<T> b) {
  FBT_ASSERT(out.cols() == b.size(), "bias_forward: shape mismatch");
  out.rowwise() += b.transpose();
}

/// \brief db (OC) += column sums of dout (N, OC).
template <class T> void bias_backward(Span<T> db, CRowMapS<T> dout) {
  FBT_ASSERT(dout.cols() == db.size(), "bias_backward: shape mismatch");
  db.noalias() += dout.colwise().sum().transpose();
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_LINEAR_INSTANTIATE(EXTERN, T) \
  EXTERN template void linear_forward<T>(RowMapS<T>, CRowMapS<T>, CRowMapS<T>); \
  EXTERN template void linear_forward_acc<T>(RowMapS<T>, CRowMapS<T>, CRowMapS<T>); \
  EXTERN template void linear_backward<T>(RowMapS<T>, RowMapS<T>, CRowMapS<T>, CRowMapS<T>, CRowMapS<T>); \
  EXTERN template void bias_forward<T>(RowMapS<T>, CSpan<T>); \
  EXTERN template void bias_backward<T>(Span<T>, CRowMapS<T>);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_LINEAR_INSTANTIATE(extern, float)
FBT_OPS_LINEAR_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
