// exercises/chain_backward.hpp: EXERCISE E2, the backward of a K-pass chain (spec section 3):
//
//   "Gradients flow through all passes: the loss of pass j reaches pass j-1's states through the fuser
//    and shift_right."
//
// The chain is the toy one of exercises/given/toy_chain.hpp: H_j = tanh(X A^T + S_j W^T),
// S_j = shift_right(H_{j-1}), S_1 = 0, loss = sum_j c_j <R, H_j>. Read its forward first.
// Your task: write the body of toy_chain_backward below. Then build and run your check:
//     cmake --build build --target exercise_chain_backward_student
//     build/exercises/check_chain_backward_student
// Stuck? exercises/hints/chain_backward.md has three graded hints; the checker tells you which to read.
#pragma once

#include "given/toy_chain.hpp"

// The mark of the shipped, untouched file: with it, and nothing written, the checker says "not attempted"
// (exit 77, ctest: skipped) instead of FAIL. Delete this line when you start.
#define FBT_EXERCISE_UNSOLVED 1

namespace fbt_course {

/// \brief Backward of toy_chain_forward: the gradient of loss = sum_j c_j <R, H_j> with respect to X, A, W.
/// ACCUMULATES (+=, never overwrite) into
///   dX (N, D)  dLoss/dX, the inputs (the same X feeds every pass)
///   dA (D, D)  dLoss/dA, the stack's matrix (used by every pass)
///   dW (D, D)  dLoss/dW, the fuser's matrix (used by passes 2..K)
/// cache holds every pass's S_j (N, D) and H_j (N, D) from the forward; R (N, D) is the loss weight.
/// Rows: n = b * p.T_ + t (sequence b, position t); p.pass_weight(j) is c_j (0-based j); p.K passes.
template <class T>
void toy_chain_backward(const ToyChain<T>& p, const ToyChainCache<T>& cache, const T* X, const T* R, T* dX, T* dA, T* dW) {
  // TODO (exercise E2): write this body. See exercises/hints/chain_backward.md if stuck.
  (void)p, (void)cache, (void)X, (void)R, (void)dX, (void)dA, (void)dW;  // delete this line
}

}  // namespace fbt_course
