// course/instructor/reference/glu_backward_reference.hpp: the reference backward of exercise E6 (the GLU fuser)
// and its known mistakes, for the checker exercises/check_glu_backward.cpp (which includes it when it is on the
// include path: exercises/CMakeLists.txt adds course/instructor/reference/ when the folder exists). The checker
// runs this backward with each mistake on the same data as the student's and, when the student's five gradients
// equal one of them in every case of the ladder, prints that mistake's diagnosis. It contains the answer: it
// lives in the teacher's folder, out of the student's tree.
#pragma once

#include <cmath>
#include <vector>

namespace fbt_course_reference {

/// The known mistakes, and kGluCorrect. (= for += is found by the checker's accumulation test, not here.)
enum GluBug { kGluCorrect, kNoSigmoidDeriv, kSwapInputs, kTransposeWU, kGluNoMean, kGluNoGain, kGluBugs };

struct GluBugInfo {
  const char* diagnosis;  // printed as "diagnosis: ..." (the mutant tests match these words)
  int hint;               // which hint of exercises/hints/glu_backward.md to read
};

inline const GluBugInfo& glu_bug_info(GluBug bug) {
  static const GluBugInfo info[kGluBugs] = {
      {"", 0},
      {"the sigmoid's derivative is missing: dW_G, dg_g and de equal the gradient with dpre = du * a; the gate's pre-activation "
       "reaches u through sigmoid, so dpre also carries sigmoid'(pre) = gate * (1 - gate)", 2},
      {"the inputs of the two matrices are swapped in dW_U and dW_G: W_U multiplies s, so dW_U collects da with s; W_G multiplies "
       "N_g(e), so dW_G collects dpre with N_g(e) (cache.ng)", 2},
      {"dW_U is transposed: W_U is stored (out, in), a[n, o] = sum_c W_U[o, c] s[n, c], so dW_U[o, c] collects da[n, o] * s[n, c]", 2},
      {"the RMSNorm backward of N_g misses its mean term (de is wrong, dW_G and dg_g are right): rg depends on the whole row of e", 3},
      {"the RMSNorm backward of N_g misses the gain g_g (de is wrong, the rest is right): ng = ehat * g_g, so ehat receives dng * g_g", 3},
  };
  return info[bug];
}

/// The five gradients of one call.
struct GluRefGrads {
  std::vector<double> ds, de, dw_u, dw_g, dg_g;  // (N, D), (N, D), (D, D), (D, D), (D)
};

/// The backward of u = (W_U s) * sigmoid(W_G N_g(e)) from its inputs (it recomputes what the forward keeps),
/// correct (kGluCorrect) or with one known mistake; ADDS into out (sized by the caller).
inline void glu_backward_reference(const double* w_u, const double* w_g, const double* g_g, double eps, const double* s, const double* e,
                                   const double* du, int N, int D, GluBug bug, GluRefGrads& out) {
  for (int n = 0; n < N; ++n) {
    const double* sr = s + std::size_t(n) * D;    // (D)
    const double* er = e + std::size_t(n) * D;    // (D)
    const double* dur = du + std::size_t(n) * D;  // (D)
    // the forward of this row
    double ms = 0;
    for (int c = 0; c < D; ++c) ms += er[c] * er[c];
    const double r = 1.0 / std::sqrt(ms / D + eps);
    std::vector<double> ehat(D), ng(D), a(D, 0.0), pre(D, 0.0);
    for (int c = 0; c < D; ++c) ehat[c] = er[c] * r, ng[c] = ehat[c] * g_g[c];
    for (int o = 0; o < D; ++o)
      for (int c = 0; c < D; ++c) a[o] += w_u[o * D + c] * sr[c], pre[o] += w_g[o * D + c] * ng[c];
    // the product and the gate
    std::vector<double> da(D), dpre(D), dng(D, 0.0);
    for (int o = 0; o < D; ++o) {
      const double gate = 1.0 / (1.0 + std::exp(-pre[o]));
      da[o] = dur[o] * gate;
      dpre[o] = bug == kNoSigmoidDeriv ? dur[o] * a[o] : dur[o] * a[o] * gate * (1.0 - gate);
    }
    // the matrices
    for (int o = 0; o < D; ++o)
      for (int c = 0; c < D; ++c) {
        const double s_in = bug == kSwapInputs ? ng[c] : sr[c], g_in = bug == kSwapInputs ? sr[c] : ng[c];
        if (bug == kTransposeWU) out.dw_u[c * D + o] += da[o] * s_in;
        else out.dw_u[o * D + c] += da[o] * s_in;
        out.dw_g[o * D + c] += dpre[o] * g_in;
        out.ds[n * D + c] += da[o] * w_u[o * D + c];
        dng[c] += dpre[o] * w_g[o * D + c];
      }
    // the norm
    double proj = 0;
    for (int c = 0; c < D; ++c) proj += dng[c] * (bug == kGluNoGain ? 1.0 : g_g[c]) * ehat[c] / D;
    for (int c = 0; c < D; ++c) {
      out.dg_g[c] += dng[c] * ehat[c];
      const double dehat = dng[c] * (bug == kGluNoGain ? 1.0 : g_g[c]);
      out.de[n * D + c] += r * (dehat - (bug == kGluNoMean ? 0.0 : ehat[c] * proj));
    }
  }
}

}  // namespace fbt_course_reference
