// course/instructor/solutions/concat_backward.hpp: REFERENCE SOLUTION of exercise E1, the backward of the concat
// fuser (spec section 2):
//
//     u = W_c [N_s(s); N_g(e)] = W_c[:, :D] ns + W_c[:, D:] ng,   ns = N_s(s), ng = N_g(e)
//
//   dW_c[:, :D] += du^T ns      dW_c[:, D:] += du^T ng                 (D, D) each = (D, N) (N, D)
//   dns = du W_c[:, :D]         dng = du W_c[:, D:]                    (N, D) = (N, D) (D, D)
//   RMSNorm y = xhat * g, xhat = x * r, r = 1 / sqrt(mean(x^2) + eps), per row:
//     dg += sum_n dy * xhat;    dx += r * (dxhat - xhat * mean_c(dxhat * xhat)),  dxhat = dy * g
// Same math as ConcatFuser::backward + pre_backward (fbt/layers/concat_fuser.hpp), written as loops.
#pragma once

#include <vector>

#include "given/concat_forward.hpp"

namespace fbt_course {

/// Backward of one RMSNorm y = rmsnorm(x) * gain, accumulating dx (N, D) and dgain (D) from dy (N, D).
template <class T> void rmsnorm_rows_backward(T* dx, T* dgain, const T* dy, const T* x, const T* gain, const T* r, int N, int D) {
  for (int n = 0; n < N; ++n) {
    const T* xr = x + std::size_t(n) * D;    // (D)
    const T* dyr = dy + std::size_t(n) * D;  // (D)
    T* dxr = dx + std::size_t(n) * D;        // (D)
    // mean_c(dxhat * xhat), with dxhat = dy * gain and xhat = x * r
    T proj = 0;
    for (int c = 0; c < D; ++c) proj += dyr[c] * gain[c] * xr[c] * r[n];
    proj /= T(D);
    for (int c = 0; c < D; ++c) {
      const T xhat = xr[c] * r[n];
      dgain[c] += dyr[c] * xhat;
      dxr[c] += r[n] * (dyr[c] * gain[c] - xhat * proj);
    }
  }
}

template <class T>
void concat_backward(const ConcatParams<T>& p, const ConcatCache<T>& cache, const T* s, const T* e, const T* du, T* ds, T* de,
                     ConcatGrads<T>& g, int N) {
  const int D = p.D;
  std::vector<T> dns(std::size_t(N) * D, T(0));  // (N, D)  dLoss / dN_s(s)
  std::vector<T> dng(std::size_t(N) * D, T(0));  // (N, D)  dLoss / dN_g(e)
  // 1. the matrix: both halves of W_c see the same du
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < D; ++o) {
      const T d = du[std::size_t(n) * D + o];
      const T* w = p.w_c + std::size_t(o) * 2 * D;  // row o of W_c (2D)
      T* dw = g.w_c + std::size_t(o) * 2 * D;       // row o of dW_c (2D)
      for (int c = 0; c < D; ++c) {
        dw[c] += d * cache.ns[std::size_t(n) * D + c];      // left half: the state part
        dw[D + c] += d * cache.ng[std::size_t(n) * D + c];  // right half: the embedding part
        dns[std::size_t(n) * D + c] += d * w[c];
        dng[std::size_t(n) * D + c] += d * w[D + c];
      }
    }
  // 2 + 3. the gains and the two RMSNorms
  rmsnorm_rows_backward(ds, g.g_s, dns.data(), s, p.g_s, cache.rs.data(), N, D);
  rmsnorm_rows_backward(de, g.g_g, dng.data(), e, p.g_g, cache.rg.data(), N, D);
}

}  // namespace fbt_course
