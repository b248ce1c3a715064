// course/instructor/reference/concat_backward_reference.hpp: the RMSNorm backward of exercise E1, correct and
// with its known mistakes, for the checker exercises/check_concat_backward.cpp (which includes it when it is on
// the include path: exercises/CMakeLists.txt adds course/instructor/reference/ when the folder exists). When the
// student's ds and de equal one of the mistakes, the checker names it. It contains part of the answer: it lives
// in the teacher's folder, out of the student's tree.
#pragma once

#include <vector>

namespace fbt_course_reference {

enum class NormBug { kNone, kNoMean, kNoGain };

/// The RMSNorm backward of one side, dx (N, D) from dy (N, D), y = x * r * gain per row, as written (kNone)
/// or with a known mistake.
inline std::vector<double> norm_backward(const std::vector<double>& dy, const std::vector<double>& x, const std::vector<double>& gain,
                                         const std::vector<double>& r, NormBug bug, int N, int D) {
  std::vector<double> dx(std::size_t(N) * D, 0.0);
  for (int n = 0; n < N; ++n) {
    double proj = 0;  // mean_c(dxhat * xhat)
    for (int c = 0; c < D; ++c) proj += dy[n * D + c] * (bug == NormBug::kNoGain ? 1.0 : gain[c]) * x[n * D + c] * r[n] / D;
    for (int c = 0; c < D; ++c) {
      const double dxhat = dy[n * D + c] * (bug == NormBug::kNoGain ? 1.0 : gain[c]);
      dx[n * D + c] = r[n] * (dxhat - (bug == NormBug::kNoMean ? 0.0 : x[n * D + c] * r[n] * proj));
    }
  }
  return dx;
}

}  // namespace fbt_course_reference
