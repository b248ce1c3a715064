// exercises/glu_backward.hpp: EXERCISE E6, the backward of the paper's GLU fuser (spec section 2, fuser "glu"):
//
//     u = (W_U s) * sigmoid(W_G N_g(e))          (forward: exercises/given/glu_forward.hpp)
//
// This is the fuser the paper trains: every fed-back pass goes through it, so its backward is the road by
// which a pass's loss reaches the earlier passes (through ds) and the token embeddings (through de).
// Your task: write the body of glu_backward below, by hand (plain loops). Then build and run your check:
//     cmake --build build --target exercise_glu_backward_student && build/exercises/check_glu_backward_student
// It runs a ladder of cases (one row and one gradient first, then all of them, then K passes sharing e) and
// compares every gradient with central finite differences.
// Stuck? exercises/hints/glu_backward.md has three graded hints; the checker tells you which to read.
#pragma once

#include "given/glu_forward.hpp"

// The mark of the shipped, untouched file: with it, and nothing written, the checker says "not attempted"
// (exit 77, ctest: skipped) instead of FAIL. Delete this line when you start.
#define FBT_EXERCISE_UNSOLVED 1

namespace fbt_course {

/// \brief Backward of u = (W_U s) * sigmoid(W_G N_g(e)).
///
/// Given du (N, D) = dLoss/du, ACCUMULATE (+=, never overwrite; the llm.c convention of fbt's kernels):
///   ds (N, D)      += dLoss/ds      what reaches the fed-back state, i.e. the previous pass's top layer
///   de (N, D)      += dLoss/de      what reaches the token embeddings (through the gate only)
///   g.w_u (D, D)   += dLoss/dW_U    the state's matrix
///   g.w_g (D, D)   += dLoss/dW_G    the gate's matrix
///   g.g_g (D)      += dLoss/dg_g    the gain of N_g (gate_norm)
/// cache is what glu_forward filled (a = W_U s, N_g(e), its rstd rg, pre = W_G N_g(e)); s and e are the
/// forward's inputs. All arrays are row-major; row n of s, e, u, du is one (sequence, position).
/// In training, the K passes share e: each pass calls this once, and de, dW_G, dg_g collect the sum.
template <class T>
void glu_backward(const GluParams<T>& p, const GluCache<T>& cache, const T* s, const T* e, const T* du, T* ds, T* de, GluGrads<T>& g,
                  int N) {
  // TODO (exercise E6): write this body. See exercises/hints/glu_backward.md if stuck.
  (void)p, (void)cache, (void)s, (void)e, (void)du, (void)ds, (void)de, (void)g, (void)N;  // delete this line
}

}  // namespace fbt_course
