// exercises/concat_backward.hpp: EXERCISE E1, the backward of the concat fuser (spec section 2):
//
//     u = W_c [N_s(s); N_g(e)]          (forward: exercises/given/concat_forward.hpp)
//
// Your task: write the body of concat_backward below. Then build and run your check:
//     cmake --build build --target exercise_concat_backward_student
//     build/exercises/check_concat_backward_student
// It compares your gradients with central finite differences and with fbt's own ConcatFuser.
// Stuck? exercises/hints/concat_backward.md has three graded hints; the checker tells you which to read.
#pragma once

#include "given/concat_forward.hpp"

// The mark of the shipped, untouched file: with it, and nothing written, the checker says "not attempted"
// (exit 77, ctest: skipped) instead of FAIL. Delete this line when you start.
#define FBT_EXERCISE_UNSOLVED 1

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
  // TODO (exercise E1): write this body. See exercises/hints/concat_backward.md if stuck.
  (void)p, (void)cache, (void)s, (void)e, (void)du, (void)ds, (void)de, (void)g, (void)N;  // delete this line
}

}  // namespace fbt_course
