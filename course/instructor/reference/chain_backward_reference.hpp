// course/instructor/reference/chain_backward_reference.hpp: the reference backward of exercise E2 and its
// known mistakes, for the checker exercises/check_chain_backward.cpp (which includes it when it is on the
// include path: exercises/CMakeLists.txt adds course/instructor/reference/ when the folder exists). The
// checker runs this backward with each mistake on the same data as the student's and, when the student's
// gradients equal one of them in every case of the ladder, prints that mistake's diagnosis. It contains the
// answer: it lives in the teacher's folder, out of the student's tree.
#pragma once

#include <algorithm>
#include <vector>

#include "given/toy_chain.hpp"

namespace fbt_course_reference {

/// The known mistakes, and kCorrect.
enum ChainBug { kCorrect, kNoCarry, kLeak, kWrongWay, kNoShift, kForwards, kNoWeight, kAfterDeriv, kWeightOnCarry, kNoReset, kChainBugs };

struct ChainBugInfo {
  const char* diagnosis;  // printed as "diagnosis: ..." (the mutant tests match these words)
  int hint;               // which hint of exercises/hints/chain_backward.md to read
};

inline const ChainBugInfo& chain_bug_info(ChainBug bug) {
  static const ChainBugInfo info[kChainBugs] = {
      {"", 0},
      {"your gradient does not reach earlier passes: it equals the detach gradient (no carry from pass j to pass j-1)", 2},
      {"the carry leaks across sequences: the first position of sequence b+1 sends gradient to the last position of sequence b", 3},
      {"the shift goes the wrong way: your carry moves the gradient of position t to t+1; S_j[t] came from H_{j-1}[t-1], so it goes to t-1", 2},
      {"the carry is not shifted: the gradient of S_j at position t must reach H_{j-1} at position t-1, not t", 2},
      {"the passes are walked forwards: pass j's carry is computed after pass j-1 has run; walk j = K-1 .. 0", 2},
      {"the pass weight is missing: your gradient equals the one with c_j = 1 for every pass (p.pass_weight(j))", 3},
      {"the carry is added after tanh': it must go through the derivative too (dZ = (c_j R + carry) * (1 - H^2))", 3},
      {"the pass weight c_j multiplies the carry too: c_j weighs only pass j's own loss term; the carry already holds the later "
       "passes' weighted losses", 3},
      {"the carry is not reset between passes: pass j-1 must receive only what pass j sends, not also what pass j received", 2},
  };
  return info[bug];
}

/// The backward of the toy chain, correct (kCorrect) or with one known mistake; accumulates into dX, dA, dW.
inline void chain_backward_reference(const fbt_course::ToyChain<double>& p, const fbt_course::ToyChainCache<double>& cache, const double* X,
                                     const double* R, ChainBug bug, double* dX, double* dA, double* dW) {
  const int N = p.N(), D = p.D;
  std::vector<double> carry(std::size_t(N) * D, 0.0), dZ(std::size_t(N) * D), dS(std::size_t(N) * D);  // (N, D) each
  for (int step = 0; step < p.K; ++step) {
    const int j = bug == kForwards ? step : p.K - 1 - step;
    const std::vector<double>& H = cache.H[j];  // (N, D)
    const std::vector<double>& S = cache.S[j];  // (N, D)
    const double c = bug == kNoWeight ? 1.0 : p.pass_weight(j);
    for (std::size_t i = 0; i < dZ.size(); ++i) {
      const double carried = bug == kNoCarry ? 0.0 : carry[i];
      const double tanh_prime = 1 - H[i] * H[i];
      if (bug == kAfterDeriv) dZ[i] = c * R[i] * tanh_prime + carried;
      else if (bug == kWeightOnCarry) dZ[i] = c * (R[i] + carried) * tanh_prime;
      else dZ[i] = (c * R[i] + carried) * tanh_prime;
    }
    std::fill(dS.begin(), dS.end(), 0.0);
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < D; ++o)
        for (int k = 0; k < D; ++k) {
          const double d = dZ[n * D + o];
          dX[n * D + k] += d * p.A[o * D + k];
          dA[o * D + k] += d * X[n * D + k];
          if (j > 0) dW[o * D + k] += d * S[n * D + k], dS[n * D + k] += d * p.W[o * D + k];
        }
    if (bug != kNoReset) std::fill(carry.begin(), carry.end(), 0.0);
    if (j == 0) continue;
    for (int b = 0; b < p.B; ++b)
      for (int t = 0; t < p.T_; ++t)
        for (int k = 0; k < D; ++k) {
          const int n = b * p.T_ + t;
          if (bug == kLeak) {  // over all rows at once: row b*T (t = 0) feeds row b*T - 1
            if (n > 0) carry[(n - 1) * D + k] += dS[n * D + k];
          } else if (bug == kWrongWay) {
            if (t + 1 < p.T_) carry[(n + 1) * D + k] += dS[n * D + k];
          } else if (bug == kNoShift) {
            carry[n * D + k] += dS[n * D + k];
          } else if (t > 0) {
            carry[(n - 1) * D + k] += dS[n * D + k];
          }
        }
  }
}

}  // namespace fbt_course_reference
