// exercises/given/concat_forward.hpp: GIVEN code for exercise E1 (docs/course/03-exercises.md).
//
// The forward of the concat fuser, spec section 2 (table) and section 9 (concatenation order):
//
//     u = W_c [N_s(s); N_g(e)]        = W_c[:, :D] N_s(s) + W_c[:, D:] N_g(e)
//     N_s(s) = s * rs * g_s,  rs = 1 / sqrt(mean_c s_c^2 + eps)      (one rstd per row)
//     N_g(e) = e * rg * g_g,  rg = 1 / sqrt(mean_c e_c^2 + eps)
//
// s (N, D): the fed-back states (already shifted); e (N, D): the token embeddings; u (N, D): the fused
// input (before N_in). W_c (D, 2D) row-major, stored (out, in) like nn.Linear: its LEFT half multiplies
// N_s(s), its RIGHT half N_g(e). The library computes the same thing in ConcatFuser (fbt/layers/concat_fuser.hpp),
// split into an e-only precompute (pre_forward) and a per-pass part (forward); here it is one function.
// Written as plain loops so every index is visible.
#pragma once

#include <cmath>
#include <vector>

namespace fbt_course {

/// The concat fuser's parameters (read-only views into someone's buffers).
template <class T> struct ConcatParams {
  int D = 0;
  T eps = T(1e-6);
  const T* w_c = nullptr;  // (D, 2D)  left half: state part, right half: embedding part
  const T* g_s = nullptr;  // (D)      gain of N_s  (model.feedback.state_norm.weight)
  const T* g_g = nullptr;  // (D)      gain of N_g  (model.feedback.gate_norm.weight)
};

/// Where the gradients of the parameters are ACCUMULATED (+=), as in every fbt backward.
template <class T> struct ConcatGrads {
  T* w_c = nullptr;  // (D, 2D)
  T* g_s = nullptr;  // (D)
  T* g_g = nullptr;  // (D)
};

/// What the forward keeps for the backward.
template <class T> struct ConcatCache {
  std::vector<T> ns;  // (N, D)  N_s(s)
  std::vector<T> rs;  // (N)     rstd of each row of s
  std::vector<T> ng;  // (N, D)  N_g(e)
  std::vector<T> rg;  // (N)     rstd of each row of e
};

/// y (N, D) = rmsnorm(x) * g; r (N) = the rstd of each row.
template <class T> void rmsnorm_rows(T* y, T* r, const T* x, const T* g, int N, int D, T eps) {
  for (int n = 0; n < N; ++n) {
    const T* xr = x + std::size_t(n) * D;  // (D)
    T ms = 0;
    for (int c = 0; c < D; ++c) ms += xr[c] * xr[c];
    r[n] = T(1) / std::sqrt(ms / T(D) + eps);
    for (int c = 0; c < D; ++c) y[std::size_t(n) * D + c] = xr[c] * r[n] * g[c];
  }
}

/// u (N, D) = W_c [N_s(s); N_g(e)]; fills the cache.
template <class T> void concat_forward(const ConcatParams<T>& p, ConcatCache<T>& cache, const T* s, const T* e, T* u, int N) {
  const int D = p.D;
  cache.ns.assign(std::size_t(N) * D, T(0)), cache.rs.assign(N, T(0));
  cache.ng.assign(std::size_t(N) * D, T(0)), cache.rg.assign(N, T(0));
  rmsnorm_rows(cache.ns.data(), cache.rs.data(), s, p.g_s, N, D, p.eps);  // (N, D)
  rmsnorm_rows(cache.ng.data(), cache.rg.data(), e, p.g_g, N, D, p.eps);  // (N, D)
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < D; ++o) {
      const T* w = p.w_c + std::size_t(o) * 2 * D;  // row o of W_c (2D)
      T acc = 0;
      for (int c = 0; c < D; ++c) acc += w[c] * cache.ns[std::size_t(n) * D + c];      // left half x N_s(s)
      for (int c = 0; c < D; ++c) acc += w[D + c] * cache.ng[std::size_t(n) * D + c];  // right half x N_g(e)
      u[std::size_t(n) * D + o] = acc;
    }
}

}  // namespace fbt_course
