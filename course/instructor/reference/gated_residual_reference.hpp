// course/instructor/reference/gated_residual_reference.hpp: the backward of exercise E5's gated residual fuser,
// u = e + sigmoid(W_g [s; e]) * (W_s s), correct and with its known mistakes, for the checker
// exercises/check_gated_residual.cpp (which includes it when it is on the include path: exercises/CMakeLists.txt
// adds course/instructor/reference/ when the folder exists). For each gradient that fails, the checker looks
// for a mistake that gives exactly the student's value, and names it. It contains the answer: it lives in the
// teacher's folder, out of the student's tree.
#pragma once

#include <cmath>
#include <vector>

namespace fbt_course_reference {

enum GatedBug { kGatedCorrect, kDsGate, kDsProposal, kDeGate, kDeResidual, kGateSign, kGateDeriv, kNoGateInDa, kSwapHalves, kGatedBugs };

struct GatedBugInfo {
  const char* diagnosis;  // printed as "diagnosis: ..." (the mutant tests match these words)
  int hint;               // which hint of exercises/hints/gated_residual.md to read
};

inline const GatedBugInfo& gated_bug_info(GatedBug bug) {
  static const GatedBugInfo info[kGatedBugs] = {
      {"", 0},
      {"ds misses the gate's state half: s also reaches u through z = W_g [s; e], so ds collects dz times the left half of W_g", 2},
      {"ds misses the proposal: s reaches u through a = W_s s, so ds collects da W_s", 2},
      {"de misses the gate's embedding half: e also reaches u through z = W_g [s; e], so de collects dz times the right half of W_g", 2},
      {"de misses the residual path: u = e + ..., so de collects du itself", 1},
      {"the sigmoid's derivative has the wrong sign: sigmoid'(z) = g (1 - g), positive", 3},
      {"the sigmoid's derivative is wrong: it is g (1 - g), where g = sigmoid(z) is what forward kept", 3},
      {"da misses the gate: u = e + g * a, so da = du * g", 2},
      {"the two halves of W_g are swapped in dW_g: its first D columns act on s, its last D on e", 2},
  };
  return info[bug];
}

struct GatedGrads {
  std::vector<double> dW_g, dW_s, ds, de;  // (D, 2D), (D, D), (N, D), (N, D)
};

/// The fuser's gradients for upstream du (N, D), from zero, correct or with one known mistake.
inline GatedGrads gated_backward_reference(const double* W_g, const double* W_s, const double* s, const double* e, const double* du, int N,
                                           int D, GatedBug bug) {
  GatedGrads g{std::vector<double>(std::size_t(D) * 2 * D, 0.0), std::vector<double>(std::size_t(D) * D, 0.0),
               std::vector<double>(std::size_t(N) * D, 0.0), std::vector<double>(std::size_t(N) * D, 0.0)};
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < D; ++o) {
      double z = 0, a = 0;
      for (int c = 0; c < D; ++c) z += W_g[o * 2 * D + c] * s[n * D + c] + W_g[o * 2 * D + D + c] * e[n * D + c], a += W_s[o * D + c] * s[n * D + c];
      const double gate = 1 / (1 + std::exp(-z)), d = du[n * D + o];
      const double deriv = bug == kGateSign ? -gate * (1 - gate) : bug == kGateDeriv ? gate : gate * (1 - gate);
      const double da = bug == kNoGateInDa ? d : d * gate, dz = d * a * deriv;
      if (bug != kDeResidual) g.de[n * D + o] += d;
      for (int c = 0; c < D; ++c) {
        g.dW_s[o * D + c] += da * s[n * D + c];
        const int left = bug == kSwapHalves ? D + c : c, right = bug == kSwapHalves ? c : D + c;
        g.dW_g[o * 2 * D + left] += dz * s[n * D + c];
        g.dW_g[o * 2 * D + right] += dz * e[n * D + c];
        if (bug != kDsProposal) g.ds[n * D + c] += da * W_s[o * D + c];
        if (bug != kDsGate) g.ds[n * D + c] += dz * W_g[o * 2 * D + c];
        if (bug != kDeGate) g.de[n * D + c] += dz * W_g[o * 2 * D + D + c];
      }
    }
  return g;
}

}  // namespace fbt_course_reference
