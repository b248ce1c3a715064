// fbt/ops/activations.hpp: the two gated products of the model.
//
// SwiGLU (Shazeer 2020), the MLP nonlinearity:   h = silu(g) * u,  silu(g) = g * sigmoid(g)
//   dg += dh * u * sigmoid(g) * (1 + g (1 - sigmoid(g))),   du += dh * silu(g)
// Sigmoid gate, the GLU fuser's product (paper Eq. 4):   y = a * sigmoid(z)
//   da += dy * sigmoid(z),   dz += dy * a * sigmoid(z) (1 - sigmoid(z))
#pragma once

#include <cmath>

#include "../core/tensor.hpp"

namespace fbt {

template <class T> inline T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

/// \brief h = silu(g) * u.  h, g, u (N, F).
template <class T> void swiglu_forward(RowMapS<T> h, CRowMapS<T> g, CRowMapS<T> u) {
  FBT_ASSERT(h.rows() == g.rows() && h.cols() == g.cols() && u.rows() == g.rows() && u.cols() == g.cols(), "swiglu_forward: shape mismatch");
  for (Eigen::Index n = 0; n < g.rows(); ++n)
    h.row(n) = (g.row(n).array() / (T(1) + (-g.row(n).array()).exp()) * u.row(n).array()).matrix();
}

/// \brief Accumulates dg, du (N, F) from dh.
template <class T> void swiglu_backward(RowMapS<T> dg, RowMapS<T> du, CRowMapS<T> dh, CRowMapS<T> g, CRowMapS<T> u) {
  FBT_ASSERT(dg.rows() == g.rows() && dg.cols() == g.cols() && du.rows() == g.rows() && dh.cols() == g.cols(), "swiglu_backward: shape mismatch");
  for (Eigen::Index n = 0; n < g.rows(); ++n) {
    const T *gr = g.data() + n * g.outerStride(), *ur = u.data() + n * u.outerStride(), *dhr = dh.data() + n * dh.outerStride();
    T *dgr = dg.data() + n * dg.outerStride(), *dur = du.data() + n * du.outerStride();
    for (Eigen::Index c = 0; c < g.cols(); ++c) {
      const T sg = sigmoid(gr[c]);
      dgr[c] += dhr[c] * ur[c] * sg * (T(1) + gr[c] * (T(1) - sg));
      dur[c] += dhr[c] * gr[c] * sg;
    }
  }
}

/// \brief y = a * sigmoid(z).  y, a, z (N, C).
template <class T> void sigmoid_gate_forward(RowMapS<T> y, CRowMapS<T> a, CRowMapS<T> z) {
  FBT_ASSERT(y.rows() == a.rows() && y.cols() == a.cols() && z.rows() == a.rows() && z.cols() == a.cols(), "sigmoid_gate_forward: shape mismatch");
  for (Eigen::Index n = 0; n < a.rows(); ++n)
    y.row(n) = (a.row(n).array() / (T(1) + (-z.row(n).array()).exp())).matrix();
}

/// \brief Accumulates da, dz (N, C) from dy. A null-data da or dz skips it.
template <class T> void sigmoid_gate_backward(RowMapS<T> da, RowMapS<T> dz, CRowMapS<T> dy, CRowMapS<T> a, CRowMapS<T> z) {
  FBT_ASSERT(dy.rows() == a.rows() && dy.cols() == a.cols() && z.rows() == a.rows() && z.cols() == a.cols(), "sigmoid_gate_backward: shape mismatch");
  for (Eigen::Index n = 0; n < a.rows(); ++n) {
    const T *ar = a.data() + n * a.outerStride(), *zr = z.data() + n * z.outerStride(), *dyr = dy.data() + n * dy.outerStride();
    for (Eigen::Index c = 0; c < a.cols(); ++c) {
      const T sg = sigmoid(zr[c]);
      if (da.data() != nullptr) da(n, c) += dyr[c] * sg;
      if (dz.data() != nullptr) dz(n, c) += dyr[c] * ar[c] * sg * (T(1) - sg);
    }
  }
}

}  // namespace fbt
