// fbt/ops/elementwise.hpp: elementwise products, a per-group broadcast scale and the sigmoid: the pieces
// a gate (an attention output gate per element or per head, a FiLM fuser) is written from on any backend.
//
//   mul:          y = a * b                              (N, C)
//   mul_add:      y += a * b                             (N, C)
//     backward of both:  da += dy * b,  db += dy * a
//   scale_groups: y[r, g*C + c] = x[r, g*C + c] * s[r, g]     x, y (R, G*C), s (R, G)
//     (G = NH heads of C = head_dim: a per-head gate; G = 1: a per-row scale)
//     backward:  dx += dy * s (broadcast over C),  ds[r, g] += sum_c dy[r, g*C + c] * x[r, g*C + c]
//   sigmoid:      y = 1 / (1 + exp(-z))                  (N, C)
//     backward:  dz += dy * y (1 - y)   (from the output y, so no exp is recomputed)
// Every backward accumulates; a null-data gradient is skipped.
#pragma once

#include "activations.hpp"

namespace fbt {

/// \brief y = a * b.  y, a, b (N, C); y may alias a or b.
template <class T> void mul_forward(RowMapS<T> y, CRowMapS<T> a, CRowMapS<T> b) {
  FBT_ASSERT(y.rows() == a.rows() && y.cols() == a.cols() && b.rows() == a.rows() && b.cols() == a.cols(), "mul_forward: shape mismatch");
  for (Eigen::Index n = 0; n < a.rows(); ++n) y.row(n) = (a.row(n).array() * b.row(n).array()).matrix();
}

/// \brief y += a * b.  y, a, b (N, C); y must not alias a or b.
template <class T> void mul_add_forward(RowMapS<T> y, CRowMapS<T> a, CRowMapS<T> b) {
  FBT_ASSERT(y.rows() == a.rows() && y.cols() == a.cols() && b.rows() == a.rows() && b.cols() == a.cols(), "mul_add_forward: shape mismatch");
  for (Eigen::Index n = 0; n < a.rows(); ++n) y.row(n).array() += a.row(n).array() * b.row(n).array();
}

/// \brief Backward of mul and mul_add: da += dy * b, db += dy * a (N, C). A null-data da or db is skipped.
template <class T> void mul_backward(RowMapS<T> da, RowMapS<T> db, CRowMapS<T> dy, CRowMapS<T> a, CRowMapS<T> b) {
  FBT_ASSERT(dy.rows() == a.rows() && dy.cols() == a.cols() && b.rows() == a.rows() && b.cols() == a.cols(), "mul_backward: shape mismatch");
  if (da.data() != nullptr) mul_add_forward<T>(da, dy, b);
  if (db.data() != nullptr) mul_add_forward<T>(db, dy, a);
}

/// \brief y (R, G*C) = x (R, G*C) scaled by s (R, G), each s[r, g] over its C elements; y may alias x.
template <class T> void scale_groups_forward(RowMapS<T> y, CRowMapS<T> x, CRowMapS<T> s, int C) {
  FBT_ASSERT(C > 0 && y.rows() == x.rows() && y.cols() == x.cols() && s.rows() == x.rows() && s.cols() * C == x.cols(),
             "scale_groups_forward: expected x, y (R, G*C) and s (R, G), got x (" + std::to_string(x.rows()) + ", " +
                 std::to_string(x.cols()) + "), s (" + std::to_string(s.rows()) + ", " + std::to_string(s.cols()) + "), C " + std::to_string(C));
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (Eigen::Index g = 0; g < s.cols(); ++g) y.row(r).segment(g * C, C) = x.row(r).segment(g * C, C) * s(r, g);
}

/// \brief dx (R, G*C) += dy * s (broadcast over C);  ds (R, G) += sum over C of dy * x. A null-data dx or ds is skipped.
template <class T> void scale_groups_backward(RowMapS<T> dx, RowMapS<T> ds, CRowMapS<T> dy, CRowMapS<T> x, CRowMapS<T> s, int C) {
  FBT_ASSERT(C > 0 && dy.rows() == x.rows() && dy.cols() == x.cols() && s.rows() == x.rows() && s.cols() * C == x.cols(),
             "scale_groups_backward: expected dy, x (R, G*C) and s (R, G)");
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (Eigen::Index g = 0; g < s.cols(); ++g) {
      if (dx.data() != nullptr) dx.row(r).segment(g * C, C) += dy.row(r).segment(g * C, C) * s(r, g);
      if (ds.data() != nullptr) ds(r, g) += dy.row(r).segment(g * C, C).dot(x.row(r).segment(g * C, C));
    }
}

/// \brief y = sigmoid(z).  y, z (N, C); y may alias z.
template <class T> void sigmoid_forward(RowMapS<T> y, CRowMapS<T> z) {
  FBT_ASSERT(y.rows() == z.rows() && y.cols() == z.cols(), "sigmoid_forward: shape mismatch");
  for (Eigen::Index n = 0; n < z.rows(); ++n) y.row(n) = (T(1) + vexp(-z.row(n).array())).inverse().matrix();
}

/// \brief dz += dy * y (1 - y), y = sigmoid(z) the forward's output.  dz, dy, y (N, C).
template <class T> void sigmoid_backward(RowMapS<T> dz, CRowMapS<T> dy, CRowMapS<T> y) {
  FBT_ASSERT(dz.rows() == y.rows() && dz.cols() == y.cols() && dy.rows() == y.rows() && dy.cols() == y.cols(), "sigmoid_backward: shape mismatch");
  for (Eigen::Index n = 0; n < y.rows(); ++n) dz.row(n).array() += dy.row(n).array() * y.row(n).array() * (T(1) - y.row(n).array());
}

}  // namespace fbt
