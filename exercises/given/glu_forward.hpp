// exercises/given/glu_forward.hpp: GIVEN code for exercise E6 (docs/course/03-exercises.md).
//
// The forward of the paper's GLU fuser (arXiv:2608.08888 Eq. 4; spec section 2, fuser "glu"), which makes the
// next pass's input from the fed-back state s and the token's embedding e:
//
//     u = (W_U s) * sigmoid(W_G N_g(e))                  (elementwise product)
//     N_g(e) = e * rg * g_g,  rg = 1 / sqrt(mean_c e_c^2 + eps)      (one rstd per row)
//
// s (N, D): the fed-back states (already shifted); e (N, D): the token embeddings; u (N, D): the fused input.
// W_U, W_G (D, D) row-major, stored (out, in) like nn.Linear: a[n, o] = sum_c W_U[o, c] s[n, c].
// g_g (D): the gain of N_g (model.feedback.gate_norm.weight). The library computes the same thing in GluFuser
// (fbt/layers/glu_fuser.hpp), split into an e-only precompute pre = W_G N_g(e) (once per step, shared by the K
// passes) and a per-pass part; here it is one function, written as plain loops so every index is visible.
#pragma once

#include <cmath>
#include <vector>

namespace fbt_course {

/// The GLU fuser's parameters (read-only views into someone's buffers).
template <class T> struct GluParams {
  int D = 0;
  T eps = T(1e-6);
  const T* w_u = nullptr;  // (D, D)  the state's matrix      (model.feedback.w_u.weight)
  const T* w_g = nullptr;  // (D, D)  the gate's matrix       (model.feedback.w_g.weight)
  const T* g_g = nullptr;  // (D)     the gain of N_g         (model.feedback.gate_norm.weight)
};

/// Where the gradients of the parameters are ACCUMULATED (+=), as in every fbt backward.
template <class T> struct GluGrads {
  T* w_u = nullptr;  // (D, D)
  T* w_g = nullptr;  // (D, D)
  T* g_g = nullptr;  // (D)
};

/// What the forward keeps for the backward (the library keeps the same: a, N_g(e), its rstd, and pre).
template <class T> struct GluCache {
  std::vector<T> a;    // (N, D)  W_U s            (the proposal)
  std::vector<T> ng;   // (N, D)  N_g(e)
  std::vector<T> rg;   // (N)     rstd of each row of e
  std::vector<T> pre;  // (N, D)  W_G N_g(e)       (the gate's pre-activation; the gate is sigmoid(pre))
};

/// sigmoid(x) = 1 / (1 + exp(-x))
template <class T> T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

/// y (N, D) = rmsnorm(x) * g; r (N) = the rstd of each row.
template <class T> void gate_norm_rows(T* y, T* r, const T* x, const T* g, int N, int D, T eps) {
  for (int n = 0; n < N; ++n) {
    const T* xr = x + std::size_t(n) * D;  // (D)
    T ms = 0;
    for (int c = 0; c < D; ++c) ms += xr[c] * xr[c];
    r[n] = T(1) / std::sqrt(ms / T(D) + eps);
    for (int c = 0; c < D; ++c) y[std::size_t(n) * D + c] = xr[c] * r[n] * g[c];
  }
}

/// y (N, D) = x W^T, i.e. y[n, o] = sum_c W[o, c] x[n, c], for x (N, D) and W (D, D).
template <class T> void matmul_rows(T* y, const T* x, const T* W, int N, int D) {
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < D; ++o) {
      T acc = 0;
      for (int c = 0; c < D; ++c) acc += W[std::size_t(o) * D + c] * x[std::size_t(n) * D + c];
      y[std::size_t(n) * D + o] = acc;
    }
}

/// u (N, D) = (W_U s) * sigmoid(W_G N_g(e)); fills the cache.
template <class T> void glu_forward(const GluParams<T>& p, GluCache<T>& cache, const T* s, const T* e, T* u, int N) {
  const int D = p.D;
  const std::size_t ND = std::size_t(N) * D;
  cache.a.assign(ND, T(0)), cache.ng.assign(ND, T(0)), cache.rg.assign(N, T(0)), cache.pre.assign(ND, T(0));
  matmul_rows(cache.a.data(), s, p.w_u, N, D);                                   // a   = W_U s          (N, D)
  gate_norm_rows(cache.ng.data(), cache.rg.data(), e, p.g_g, N, D, p.eps);       // ng  = N_g(e)         (N, D)
  matmul_rows(cache.pre.data(), cache.ng.data(), p.w_g, N, D);                   // pre = W_G N_g(e)     (N, D)
  for (std::size_t i = 0; i < ND; ++i) u[i] = cache.a[i] * sigmoid(cache.pre[i]);  // u = a * sigmoid(pre)
}

}  // namespace fbt_course
