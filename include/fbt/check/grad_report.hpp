// fbt/check/grad_report.hpp: what a finite-difference check reports (check/gradcheck.hpp): the error of one
// gradient against central differences (GradCheck) and the table of a whole step's tensors (StepGradReport).
// Kept apart so that a program which only reads a report (fbt/session.hpp) does not include the model.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace fbt {

struct GradCheck {
  double err = 0;      ///< normwise relative error
  double max_abs = 0;  ///< max |analytic - fd|
  double norm = 0;     ///< ||fd||_2 (a check against an all-zero gradient)
};

struct StepGradReport {
  struct Row {
    std::string tensor;
    GradCheck check;
  };
  std::vector<Row> rows;  ///< one per parameter tensor, in checkpoint order
  /// Every tensor within tol.
  bool ok(double tol = 1e-6) const {
    for (const auto& r : rows)
      if (!(r.check.err < tol)) return false;
    return !rows.empty();
  }
  double worst() const {
    double w = 0;
    for (const auto& r : rows) w = std::max(w, r.check.err);
    return w;
  }
  std::string str() const {
    std::string s;
    char line[256];
    for (const auto& r : rows) {
      std::snprintf(line, sizeof line, "  %-48s rel err %.3g  |g_fd| %.3g\n", r.tensor.c_str(), r.check.err, r.check.norm);
      s += line;
    }
    return s;
  }
};

}  // namespace fbt
