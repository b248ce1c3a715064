// fbt/ops/activations.hpp: the two gated products of the model.
//
// SwiGLU (Shazeer 2020), the MLP nonlinearity:   h = silu(g) * u,  silu(g) = g * sigmoid(g)
//   dg += dh * u * sigmoid(g) * (1 + g (1 - sigmoid(g))),   du += dh * silu(g)
// Sigmoid gate, the GLU fuser's product (paper Eq. 4):   y = a * sigmoid(z)
//   da += dy * sigmoid(z),   dz += dy * a * sigmoid(z) (1 - sigmoid(z))
#pragma once

#include <algorithm>
#include <cmath>

#include "../core/tensor.hpp"
#include "vexp.hpp"

namespace fbt {

template <class T> inline T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

/// \brief h = silu(g) * u.  h, g, u (N, F).
template <class T> void swiglu_forward(RowMapS<T> h, CRowMapS<T> g, CRowMapS<T> u) {
  FBT_ASSERT(h.rows() == g.rows() && h.cols() == g.cols() && u.rows() == g.rows() && u.cols() == g.cols(), "swiglu_forward: shape mismatch");
  for (Eigen::Index n = 0; n < g.rows(); ++n)
    h.row(n) = (g.row(n).array() / (T(1) + vexp(-g.row(n).array())) * u.row(n).array()).matrix();
}

/// Elementwise backward kernels work on chunks of a row with the sigmoid held in a stack buffer, so
/// Eigen vectorises exp without allocating a temporary.
constexpr int kActChunk = 256;
template <class T> using ArrMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using CArrMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

/// \brief Accumulates dg, du (N, F) from dh.
template <class T> void swiglu_backward(RowMapS<T> dg, RowMapS<T> du, CRowMapS<T> dh, CRowMapS<T> g, CRowMapS<T> u) {
  FBT_ASSERT(dg.rows() == g.rows() && dg.cols() == g.cols() && du.rows() == g.rows() && dh.cols() == g.cols(), "swiglu_backward: shape mismatch");
  alignas(64) T buf[kActChunk];
  for (Eigen::Index n = 0; n < g.rows(); ++n)
    for (Eigen::Index c0 = 0; c0 < g.cols(); c0 += kActChunk) {
      const Eigen::Index len = std::min<Eigen::Index>(kActChunk, g.cols() - c0);
      ArrMap<T> sg(buf, len);
      CArrMap<T> G(g.data() + n * g.outerStride() + c0, len), U(u.data() + n * u.outerStride() + c0, len);
      CArrMap<T> DH(dh.data() + n * dh.outerStride() + c0, len);
      sg = (T(1) + vexp(-G)).inverse();
      ArrMap<T>(dg.data() + n * dg.outerStride() + c0, len) += DH * U * sg * (T(1) + G * (T(1) - sg));
      ArrMap<T>(du.data() + n * du.outerStride() + c0, len) += DH * G * sg;
    }
}

/// \brief y = a * sigmoid(z).  y, a, z (N, C).
template <class T> void sigmoid_gate_forward(RowMapS<T> y, CRowMapS<T> a, CRowMapS<T> z) {
  FBT_ASSERT(y.rows() == a.rows() && y.cols() == a.cols() && z.rows() == a.rows() && z.cols() == a.cols(), "sigmoid_gate_forward: shape mismatch");
  for (Eigen::Index n = 0; n < a.rows(); ++n)
    y.row(n) = (a.row(n).array() / (T(1) + vexp(-z.row(n).array()))).matrix();
}

/// \brief Accumulates da, dz (N, C) from dy. A null-data da or dz skips it.
template <class T> void sigmoid_gate_backward(RowMapS<T> da, RowMapS<T> dz, CRowMapS<T> dy, CRowMapS<T> a, CRowMapS<T> z) {
  FBT_ASSERT(dy.rows() == a.rows() && dy.cols() == a.cols() && z.rows() == a.rows() && z.cols() == a.cols(), "sigmoid_gate_backward: shape mismatch");
  alignas(64) T buf[kActChunk];
  for (Eigen::Index n = 0; n < a.rows(); ++n)
    for (Eigen::Index c0 = 0; c0 < a.cols(); c0 += kActChunk) {
      const Eigen::Index len = std::min<Eigen::Index>(kActChunk, a.cols() - c0);
      ArrMap<T> sg(buf, len);
      CArrMap<T> A(a.data() + n * a.outerStride() + c0, len), Z(z.data() + n * z.outerStride() + c0, len);
      CArrMap<T> DY(dy.data() + n * dy.outerStride() + c0, len);
      sg = (T(1) + vexp(-Z)).inverse();
      if (da.data() != nullptr) ArrMap<T>(da.data() + n * da.outerStride() + c0, len) += DY * sg;
      if (dz.data() != nullptr) ArrMap<T>(dz.data() + n * dz.outerStride() + c0, len) += DY * A * sg * (T(1) - sg);
    }
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_ACTIVATIONS_INSTANTIATE(EXTERN, T) \
  EXTERN template void swiglu_forward<T>(RowMapS<T>, CRowMapS<T>, CRowMapS<T>); \
  EXTERN template void swiglu_backward<T>(RowMapS<T>, RowMapS<T>, CRowMapS<T>, CRowMapS<T>, CRowMapS<T>); \
  EXTERN template void sigmoid_gate_forward<T>(RowMapS<T>, CRowMapS<T>, CRowMapS<T>); \
  EXTERN template void sigmoid_gate_backward<T>(RowMapS<T>, RowMapS<T>, CRowMapS<T>, CRowMapS<T>, CRowMapS<T>);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_ACTIVATIONS_INSTANTIATE(extern, float)
FBT_OPS_ACTIVATIONS_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
