// exercises/concat_backward.hpp: EXERCISE E1, the backward of the concat fuser (spec section 2):
//
//     u = W_c [N_s(s); N_g(e)]          (forward: exercises/given/concat_forward.hpp)
//
// Your task: write the body of concat_backward below. Then build and run your check:
//     cmake --build build --target exercise_concat_backward_student
//     build/exercises/check_concat_backward_student
// It compares your gradients with central finite differences and with fbt's own ConcatFuser.
// The reference solution is exercises/solutions/concat_backward.hpp: read it only after trying.
#pragma once

#include "given/concat_forward.hpp"

namespace fbt_course {

/// \brief Backward of u = W_c [N_s(s); N_g(e)].
///
/// Given du (N, D) = dLoss/du, ACCUMULATE (+=, never overwrite; the llm.c convention of fbt's kernels):
///   ds (N, D)      += dLoss/ds
///   de (N, D)      += dLoss/de
///   g.w_c (D, 2D)  += dLoss/dW_c
///   g.g_s (D)      += dLoss/dg_s     (state_norm gain)
///   g.g_g (D)      += dLoss/dg_g     (gate_norm gain)
/// cache is what concat_forward filled (N_s(s), its rstd rs, N_g(e), its rstd rg); s and e are the
/// forward's inputs. All arrays are row-major.
template <class T>
void concat_backward(const ConcatParams<T>& p, const ConcatCache<T>& cache, const T* s, const T* e, const T* du, T* ds, T* de,
                     ConcatGrads<T>& g, int N) {
  // TODO (exercise E1): write this body. Until you do, every gradient stays zero and the check fails.
  //
  // Work it out in three steps (per row n; D = p.D; xhat = x * r is the normalised row before the gain):
  //  1. The matrix: u[n, o] = sum_c W_c[o, c] ns[n, c] + sum_c W_c[o, D + c] ng[n, c], so
  //       dW_c[o, c]     += du[n, o] ns[n, c]          dW_c[o, D + c] += du[n, o] ng[n, c]
  //       dns[n, c]       = sum_o du[n, o] W_c[o, c]   dng[n, c]       = sum_o du[n, o] W_c[o, D + c]
  //  2. The gains: ns = shat * g_s with shat = s * rs, so  dg_s[c] += sum_n dns[n, c] shat[n, c]  (same for g_g).
  //  3. Through the RMSNorm (dshat = dns * g_s; see the header of include/fbt/ops/rmsnorm.hpp):
  //       ds[n, c] += rs[n] * (dshat[n, c] - shat[n, c] * mean_c'(dshat[n, c'] shat[n, c']))   (same for e)
  // You may compose fbt's kernels instead (fbt::linear_backward, fbt::rmsnorm_backward) if you like.
  (void)p, (void)cache, (void)s, (void)e, (void)du, (void)ds, (void)de, (void)g, (void)N;  // delete this line
}

}  // namespace fbt_course
