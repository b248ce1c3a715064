// course/instructor/solutions/glu_backward.hpp: REFERENCE SOLUTION of exercise E6, the backward of the GLU fuser
// (spec section 2):
//
//     u = a * gate,   a = W_U s,   gate = sigmoid(pre),   pre = W_G ng,   ng = N_g(e)
//
//   da    = du * gate                       dpre = du * a * gate * (1 - gate)              (N, D) each
//   dW_U += da^T s      ds += da W_U        dW_G += dpre^T ng      dng = dpre W_G          (D, D), (N, D)
//   RMSNorm ng = ehat * g_g, ehat = e * rg, per row:
//     dg_g += sum_n dng * ehat;   de += rg * (dehat - ehat * mean_c(dehat * ehat)),  dehat = dng * g_g
// Same math as GluFuser::backward + pre_backward (fbt/layers/glu_fuser.hpp), written as loops.
#pragma once

#include <vector>

#include "given/glu_forward.hpp"

namespace fbt_course {

template <class T>
void glu_backward(const GluParams<T>& p, const GluCache<T>& cache, const T* s, const T* e, const T* du, T* ds, T* de, GluGrads<T>& g,
                  int N) {
  const int D = p.D;
  const std::size_t ND = std::size_t(N) * D;
  // 1. the product u = a * gate
  std::vector<T> da(ND), dpre(ND);  // (N, D) each
  for (std::size_t i = 0; i < ND; ++i) {
    const T gate = sigmoid(cache.pre[i]);
    da[i] = du[i] * gate;
    dpre[i] = du[i] * cache.a[i] * gate * (T(1) - gate);  // sigmoid'(pre) = gate (1 - gate)
  }
  // 2. the two matrices: a = W_U s and pre = W_G ng
  std::vector<T> dng(ND, T(0));  // (N, D)
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < D; ++o) {
      const T da_no = da[std::size_t(n) * D + o], dp_no = dpre[std::size_t(n) * D + o];
      for (int c = 0; c < D; ++c) {
        g.w_u[std::size_t(o) * D + c] += da_no * s[std::size_t(n) * D + c];
        ds[std::size_t(n) * D + c] += da_no * p.w_u[std::size_t(o) * D + c];
        g.w_g[std::size_t(o) * D + c] += dp_no * cache.ng[std::size_t(n) * D + c];
        dng[std::size_t(n) * D + c] += dp_no * p.w_g[std::size_t(o) * D + c];
      }
    }
  // 3. the gate's norm ng = N_g(e), row by row
  for (int n = 0; n < N; ++n) {
    const T r = cache.rg[n];
    const T* er = e + std::size_t(n) * D;      // (D)
    const T* dngr = dng.data() + std::size_t(n) * D;  // (D)
    T proj = 0;  // mean_c(dehat * ehat)
    for (int c = 0; c < D; ++c) proj += dngr[c] * p.g_g[c] * er[c] * r / T(D);
    for (int c = 0; c < D; ++c) {
      const T ehat = er[c] * r;
      g.g_g[c] += dngr[c] * ehat;
      de[std::size_t(n) * D + c] += r * (dngr[c] * p.g_g[c] - ehat * proj);
    }
  }
}

}  // namespace fbt_course
