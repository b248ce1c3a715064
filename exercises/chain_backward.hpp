// exercises/chain_backward.hpp: EXERCISE E2, the backward of a K-pass chain (spec section 3):
//
//   "Gradients flow through all passes: the loss of pass j reaches pass j-1's states through the fuser
//    and shift_right.  Backward of the chain: dH_{j-1}[:, t] += dS[:, t+1]."
//
// The chain is the toy one of exercises/given/toy_chain.hpp: H_j = tanh(X A^T + S_j W^T),
// S_j = shift_right(H_{j-1}), S_1 = 0, loss = sum_j c_j <R, H_j>.
// Your task: write the body of toy_chain_backward below. Then build and run your check:
//     cmake --build build --target exercise_chain_backward_student
//     build/exercises/check_chain_backward_student
// The reference solution is exercises/solutions/chain_backward.hpp: read it only after trying.
#pragma once

#include "given/toy_chain.hpp"

namespace fbt_course {

/// \brief Backward of toy_chain_forward. ACCUMULATES (+=) into
///   dX (N, D)  the gradient of the inputs: X is used by EVERY pass, so it collects from all of them
///   dA (D, D)  the stack's matrix (used by every pass)
///   dW (D, D)  the fuser's matrix (used by passes 2..K)
/// cache holds every pass's S_j and H_j from the forward; R (N, D) is the loss weight of toy_chain_forward.
template <class T>
void toy_chain_backward(const ToyChain<T>& p, const ToyChainCache<T>& cache, const T* X, const T* R, T* dX, T* dA, T* dW) {
  // TODO (exercise E2): write this body. Until you do, every gradient stays zero and the check fails.
  //
  // Walk the passes BACKWARDS, j = K-1 .. 0 (0-based), with a "carry" (N, D) that starts at zero:
  //   dH  = c_j R + carry                      this pass's own loss, plus what pass j+1 sent back
  //   dZ  = dH * (1 - H_j^2)                   tanh' (elementwise)
  //   dX += dZ A;   dA += dZ^T X               Z = X A^T + S_j W^T
  //   if j > 0:  dW += dZ^T S_j;  dS = dZ W;  then the new carry (for pass j-1) is shift_right's backward:
  //              carry[b, t-1] = dS[b, t]  for t = 1 .. T-1, inside each sequence b (never across b!),
  //              and dS[b, 0] is dropped (position 0 had no source).
  // Rows: n = b * p.T_ + t; p.pass_weight(j) gives c_j.
  (void)p, (void)cache, (void)X, (void)R, (void)dX, (void)dA, (void)dW;  // delete this line
}

}  // namespace fbt_course
