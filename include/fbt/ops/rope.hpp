// fbt/ops/rope.hpp: rotary position embedding, rotate-half convention (Su et al. 2021; HF Llama/Qwen3).
//
// For each head vector x (hs) at position p, with half = hs/2 and freq_i = theta^(-2i/hs):
//   y_i        = x_i cos(p f_i) - x_{i+half} sin(p f_i)
//   y_{i+half} = x_{i+half} cos(p f_i) + x_i sin(p f_i)
// The map is a rotation R(p), so backward is dx += R(p)^T dy. Positions count from 0 (spec section 9).
#pragma once

#include <cmath>
#include <vector>

#include "../core/tensor.hpp"

namespace fbt {

/// A read-only view of cos/sin tables (max_pos, half): what the kernels read (host or device memory).
template <class T> struct RopeView {
  const T* cos = nullptr;  // (max_pos, half)
  const T* sin = nullptr;  // (max_pos, half)
  int max_pos = 0, half = 0;
};

/// \brief Fills cos (max_pos, hs/2) then sin (max_pos, hs/2) at dst (2 * max_pos * hs/2 elements),
/// computed in double then rounded to T.
template <class T> void rope_fill(T* dst, int max_pos, int hs, double theta) {
  FBT_ASSERT(hs % 2 == 0, "RoPE needs an even head_dim, got " + std::to_string(hs));
  const int half = hs / 2;
  T* c = dst;
  T* s = dst + std::size_t(max_pos) * half;
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < half; ++i) {
      const double f = std::pow(theta, -2.0 * i / hs), a = p * f;
      c[std::size_t(p) * half + i] = T(std::cos(a));
      s[std::size_t(p) * half + i] = T(std::sin(a));
    }
}

/// Precomputed cos/sin tables (max_pos, hs/2), computed in double then rounded to T.
template <class T> struct RopeTable {
  int max_pos = 0, half = 0;
  std::vector<T> cos_, sin_;  // (max_pos, half)
  RopeTable() = default;
  RopeTable(int max_pos_, int hs, double theta) : max_pos(max_pos_), half(hs / 2) {
    std::vector<T> both(std::size_t(2) * max_pos * half);
    rope_fill(both.data(), max_pos, hs, theta);
    cos_.assign(both.begin(), both.begin() + std::size_t(max_pos) * half);
    sin_.assign(both.begin() + std::size_t(max_pos) * half, both.end());
  }
  RopeView<T> view() const { return RopeView<T>{cos_.data(), sin_.data(), max_pos, half}; }
};

/// \brief out = R(pos) inp for every head.  out, inp (N, NH*hs); pos (N). out may alias inp exactly.
template <class T>
void rope_forward(RowMapS<T> out, CRowMapS<T> inp, const int* pos, const RopeView<T>& tab, int NH) {
  const int half = tab.half, hs = 2 * half;
  FBT_ASSERT(inp.cols() == Eigen::Index(NH) * hs && out.rows() == inp.rows() && out.cols() == inp.cols(), "rope_forward: shape mismatch");
  using A = Eigen::Array<T, Eigen::Dynamic, 1>;
  for (Eigen::Index n = 0; n < inp.rows(); ++n) {
    FBT_ASSERT(pos[n] >= 0 && pos[n] < tab.max_pos, "rope_forward: position " + std::to_string(pos[n]) + " outside the table");
    const Eigen::Map<const A> c(tab.cos + std::size_t(pos[n]) * half, half), s(tab.sin + std::size_t(pos[n]) * half, half);
    for (int h = 0; h < NH; ++h) {
      const T* x = inp.data() + n * inp.outerStride() + h * hs;
      T* y = out.data() + n * out.outerStride() + h * hs;
      Eigen::Map<const A> x1(x, half), x2(x + half, half);
      Eigen::Map<A> y1(y, half), y2(y + half, half);
      // out may be inp: keep the old second half in a stack buffer, then write both halves from it
      alignas(64) T old2[512];
      FBT_ASSERT(half <= 512, "rope_forward: head_dim over 1024");
      Eigen::Map<A> o2(old2, half);
      o2 = x2;
      y2 = o2 * c + x1 * s;
      y1 = x1 * c - o2 * s;
    }
  }
}

/// \brief dinp += R(pos)^T dout.  dinp, dout (N, NH*hs).
template <class T>
void rope_backward(RowMapS<T> dinp, CRowMapS<T> dout, const int* pos, const RopeView<T>& tab, int NH) {
  const int half = tab.half, hs = 2 * half;
  FBT_ASSERT(dout.cols() == Eigen::Index(NH) * hs && dinp.rows() == dout.rows() && dinp.cols() == dout.cols(), "rope_backward: shape mismatch");
  using A = Eigen::Array<T, Eigen::Dynamic, 1>;
  for (Eigen::Index n = 0; n < dout.rows(); ++n) {
    FBT_ASSERT(pos[n] >= 0 && pos[n] < tab.max_pos, "rope_backward: position " + std::to_string(pos[n]) + " outside the table");
    const Eigen::Map<const A> c(tab.cos + std::size_t(pos[n]) * half, half), s(tab.sin + std::size_t(pos[n]) * half, half);
    for (int h = 0; h < NH; ++h) {
      const T* dy = dout.data() + n * dout.outerStride() + h * hs;
      T* dx = dinp.data() + n * dinp.outerStride() + h * hs;
      Eigen::Map<const A> dy1(dy, half), dy2(dy + half, half);
      Eigen::Map<A> dx1(dx, half), dx2(dx + half, half);
      dx1 += dy1 * c + dy2 * s;  // R^T: the rotation by -angle
      dx2 += dy2 * c - dy1 * s;
    }
  }
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_ROPE_INSTANTIATE(EXTERN, T) \
  EXTERN template void rope_fill<T>(T*, int, int, double); \
  EXTERN template void rope_forward<T>(RowMapS<T>, CRowMapS<T>, const int*, const RopeView<T>&, int); \
  EXTERN template void rope_backward<T>(RowMapS<T>, CRowMapS<T>, const int*, const RopeView<T>&, int);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_ROPE_INSTANTIATE(extern, float)
FBT_OPS_ROPE_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
