// course/instructor/solutions/chain_backward.hpp: REFERENCE SOLUTION of exercise E2, the backward of the toy K-pass
// chain (exercises/given/toy_chain.hpp; spec section 3):
//
//   for j = K..1:   dH_j = c_j R + carry_j                 carry_K = 0 (nothing after the last pass)
//                   dZ_j = dH_j * (1 - H_j^2)
//                   dX += dZ_j A,  dA += dZ_j^T X          (N, D) (D, D);  (D, N) (N, D)
//                   dW += dZ_j^T S_j,  dS_j = dZ_j W       only for j >= 2 (pass 1 is plain)
//                   carry_{j-1}[b, t-1] = dS_j[b, t]       shift_right's backward: dH_{j-1}[:, t] += dS[:, t+1]
// The library does the same with PassRunner::pass_backward (fbt/model/pass.hpp) and fbt::shift_right_backward (fbt/ops/shift.hpp).
#pragma once

#include <vector>

#include "given/toy_chain.hpp"

namespace fbt_course {

template <class T>
void toy_chain_backward(const ToyChain<T>& p, const ToyChainCache<T>& cache, const T* X, const T* R, T* dX, T* dA, T* dW) {
  const int N = p.N(), D = p.D;
  std::vector<T> carry(std::size_t(N) * D, T(0));  // (N, D)  dLoss/dH_j from the passes after j
  std::vector<T> dZ(std::size_t(N) * D);           // (N, D)
  std::vector<T> dS(std::size_t(N) * D);           // (N, D)
  for (int j = p.K - 1; j >= 0; --j) {
    const std::vector<T>& H = cache.H[j];  // (N, D)
    const std::vector<T>& S = cache.S[j];  // (N, D)
    const T c = p.pass_weight(j);
    // dZ = (c R + carry) * tanh'(Z)
    for (std::size_t i = 0; i < dZ.size(); ++i) dZ[i] = (c * R[i] + carry[i]) * (T(1) - H[i] * H[i]);
    // Z = X A^T + S W^T
    std::fill(dS.begin(), dS.end(), T(0));
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < D; ++o) {
        const T d = dZ[std::size_t(n) * D + o];
        for (int k = 0; k < D; ++k) {
          dX[std::size_t(n) * D + k] += d * p.A[std::size_t(o) * D + k];
          dA[std::size_t(o) * D + k] += d * X[std::size_t(n) * D + k];
          if (j > 0) {
            dW[std::size_t(o) * D + k] += d * S[std::size_t(n) * D + k];
            dS[std::size_t(n) * D + k] += d * p.W[std::size_t(o) * D + k];
          }
        }
      }
    // the carry for pass j-1: S_j[b, t] = H_{j-1}[b, t-1]  =>  dH_{j-1}[b, t-1] += dS_j[b, t]
    std::fill(carry.begin(), carry.end(), T(0));
    if (j > 0)
      for (int b = 0; b < p.B; ++b)
        for (int t = 1; t < p.T_; ++t)  // t = 0 had no source; t-1 never leaves sequence b
          for (int k = 0; k < D; ++k) carry[(std::size_t(b) * p.T_ + t - 1) * D + k] += dS[(std::size_t(b) * p.T_ + t) * D + k];
  }
}

}  // namespace fbt_course
