// exercises/given/toy_chain.hpp: GIVEN code for exercise E2 (docs/course/03-exercises.md): the forward of a
// toy K-pass chain with exactly the shape of spec section 3, with a one-layer "stack" so that every line fits
// on a screen.
//
//   pass 1 (plain):   S_1 = 0,                     H_1 = tanh(X A^T)
//   pass j >= 2:      S_j = shift_right(H_{j-1}),  H_j = tanh(X A^T + S_j W^T)     S_j[b, t] = H_{j-1}[b, t-1]
//   loss = sum_j c_j * sum_{n,d} R[n, d] H_j[n, d],  c_1 = 1,  c_j = lambda / (K - 1)  (spec section 3's weights)
//
// X (N, D) plays the token embeddings e (the same in every pass), R (N, D) the targets (the same in every
// pass), A (D, D) the "stack", W (D, D) the fuser. N = B * T rows: B sequences of T positions, row n = b * T + t.
// Position t = 0 of every sequence gets S = 0, i.e. it is plain in every pass (spec section 2).
// F(S) = tanh(X A^T + S W^T) reads, at position t, only the fed-back state at t, which came from t-1, so the
// chain is a Jacobi iteration for H* = F(shift_right(H*)) and pass k is exact for t <= max(p, 1) + k - 1, which
// is t <= k here (invariant 1 with p = 0: position 1, t = 1 counted from 1, is plain in every pass).
// The shift is a plain loop here, on purpose: its backward is part of exercise E2 (the library's is
// fbt::shift_right_backward in fbt/ops/shift.hpp; the exercise is to write it, not to call it).
#pragma once

#include <cmath>
#include <vector>

namespace fbt_course {

template <class T> struct ToyChain {
  int B = 0, T_ = 0, D = 0, K = 0;  // T_ = positions per sequence
  T lambda = T(1);
  const T* A = nullptr;  // (D, D)  the stack
  const T* W = nullptr;  // (D, D)  the fuser
  int N() const { return B * T_; }
  /// c_j of pass j (0-based j): 1 for the plain pass, lambda / (K - 1) for the others.
  T pass_weight(int j) const { return j == 0 ? T(1) : lambda / T(K - 1); }
};

/// What the forward keeps: every pass's fed-back input and output.
template <class T> struct ToyChainCache {
  std::vector<std::vector<T>> S;  // K x (N, D)  S[0] is all zero (pass 1 is plain)
  std::vector<std::vector<T>> H;  // K x (N, D)  tanh outputs
};

/// Runs the K passes on X (N, D); returns the loss sum_j c_j <R, H_j>.
template <class T> double toy_chain_forward(const ToyChain<T>& p, ToyChainCache<T>& cache, const T* X, const T* R) {
  const int N = p.N(), D = p.D;
  cache.S.assign(p.K, std::vector<T>(std::size_t(N) * D, T(0)));
  cache.H.assign(p.K, std::vector<T>(std::size_t(N) * D, T(0)));
  double loss = 0;
  for (int j = 0; j < p.K; ++j) {
    std::vector<T>& S = cache.S[j];  // (N, D)
    std::vector<T>& H = cache.H[j];  // (N, D)
    if (j > 0)  // shift_right: S_j[b, t] = H_{j-1}[b, t-1] inside each sequence b; S_j[b, 0] stays zero
      for (int b = 0; b < p.B; ++b)
        for (int t = 1; t < p.T_; ++t)
          for (int d = 0; d < D; ++d) S[(std::size_t(b) * p.T_ + t) * D + d] = cache.H[j - 1][(std::size_t(b) * p.T_ + t - 1) * D + d];
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < D; ++o) {
        T z = 0;  // Z[n, o] = sum_c X[n, c] A[o, c] + sum_c S[n, c] W[o, c]
        for (int c = 0; c < D; ++c) z += X[std::size_t(n) * D + c] * p.A[std::size_t(o) * D + c];
        for (int c = 0; c < D; ++c) z += S[std::size_t(n) * D + c] * p.W[std::size_t(o) * D + c];
        H[std::size_t(n) * D + o] = std::tanh(z);
      }
    double l = 0;
    for (std::size_t i = 0; i < H.size(); ++i) l += double(R[i]) * double(H[i]);
    loss += double(p.pass_weight(j)) * l;
  }
  return loss;
}

}  // namespace fbt_course
