// fbt/ops/shift.hpp: shift_right, the map that feeds pass j-1's states to pass j (spec section 3).
//
//   out[b, 0] = 0,   out[b, t] = inp[b, t-1]   (t >= 1)
//   backward:  dinp[b, t-1] += dout[b, t]
#pragma once

#include "../core/tensor.hpp"

namespace fbt {

/// \brief out, inp (B*T, C): each batch row's sequence moved one position later; position 0 zero.
template <class T> void shift_right_forward(RowMapS<T> out, CRowMapS<T> inp, int B, int Tn) {
  FBT_ASSERT(out.rows() == Eigen::Index(B) * Tn && inp.rows() == out.rows() && inp.cols() == out.cols(), "shift_right_forward: shape mismatch");
  for (int b = 0; b < B; ++b) {
    const Eigen::Index r0 = Eigen::Index(b) * Tn;
    out.row(r0).setZero();
    if (Tn > 1) out.middleRows(r0 + 1, Tn - 1) = inp.middleRows(r0, Tn - 1);
  }
}

/// \brief dinp (B*T, C) += dout shifted one position earlier (dout at position 0 has no source).
template <class T> void shift_right_backward(RowMapS<T> dinp, CRowMapS<T> dout, int B, int Tn) {
  FBT_ASSERT(dout.rows() == Eigen::Index(B) * Tn && dinp.rows() == dout.rows() && dinp.cols() == dout.cols(), "shift_right_backward: shape mismatch");
  for (int b = 0; b < B; ++b) {
    const Eigen::Index r0 = Eigen::Index(b) * Tn;
    if (Tn > 1) dinp.middleRows(r0, Tn - 1) += dout.middleRows(r0 + 1, Tn - 1);
  }
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_SHIFT_INSTANTIATE(EXTERN, T) \
  EXTERN template void shift_right_forward<T>(RowMapS<T>, CRowMapS<T>, int, int); \
  EXTERN template void shift_right_backward<T>(RowMapS<T>, CRowMapS<T>, int, int);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_SHIFT_INSTANTIATE(extern, float)
FBT_OPS_SHIFT_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
