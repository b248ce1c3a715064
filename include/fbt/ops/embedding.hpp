// fbt/ops/embedding.hpp: token embedding lookup, whose table is tied to the LM head by default.
//
//   out[n] = E[tok_n]        backward: dE[tok_n] += dout[n]
// (The tied head's gradient, dE += dlogits^T H, is a linear_backward in the model.)
#pragma once

#include <string>

#include "../core/tensor.hpp"

namespace fbt {

/// \brief out (N, C) = rows of E (V, C) picked by tokens (N). Throws on a token outside [0, V).
template <class T> void embedding_forward(RowMapS<T> out, const int* tokens, CRowMapS<T> E) {
  FBT_ASSERT(out.cols() == E.cols(), "embedding_forward: shape mismatch");
  for (Eigen::Index n = 0; n < out.rows(); ++n) {
    FBT_ASSERT(tokens[n] >= 0 && tokens[n] < E.rows(),
               "token id " + std::to_string(tokens[n]) + " at position " + std::to_string(n) + " is outside the vocabulary [0, " +
                   std::to_string(E.rows()) + ")");
    out.row(n) = E.row(tokens[n]);
  }
}

/// \brief dE (V, C) += dout (N, C) scattered by tokens.
template <class T> void embedding_backward(RowMapS<T> dE, CRowMapS<T> dout, const int* tokens) {
  FBT_ASSERT(dout.cols() == dE.cols(), "embedding_backward: shape mismatch");
  for (Eigen::Index n = 0; n < dout.rows(); ++n) {
    FBT_ASSERT(tokens[n] >= 0 && tokens[n] < dE.rows(), "embedding_backward: token id " + std::to_string(tokens[n]) + " outside the vocabulary");
    dE.row(tokens[n]) += dout.row(n);
  }
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_EMBEDDING_INSTANTIATE(EXTERN, T) \
  EXTERN template void embedding_forward<T>(RowMapS<T>, const int*, CRowMapS<T>); \
  EXTERN template void embedding_backward<T>(RowMapS<T>, CRowMapS<T>, const int*);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_EMBEDDING_INSTANTIATE(extern, float)
FBT_OPS_EMBEDDING_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
