// fbt/layers/common.hpp: what every layer shares: the shape of one pass and how parameters are reached.
//
// A layer is a small value type that owns no tensors (STYLE 2.2): it keeps its config and the offsets
// of its parameters in the flat ParamStore, says how big its cache is, and has const forward/backward
// members that take the cache explicitly, so the K-pass objective can hold one cache per pass.
#pragma once

#include <cstring>

#include "../core/arena.hpp"
#include "../core/params.hpp"
#include "../core/tensor.hpp"

namespace fbt {

/// The shape of one pass over a batch, with the per-position tables every layer may need.
struct PassShape {
  int B = 0, T = 0;
  const int* pos = nullptr;    ///< (B*T) RoPE position of each token (restarts at a document start when masked)
  const int* first = nullptr;  ///< (B*T) first position of the token's attention window within its row
  int N() const { return B * T; }
};

/// Zero n elements (gradient scratch is accumulated into, so it is cleared before use).
template <class T> inline void zero(T* p, std::size_t n) { std::memset(static_cast<void*>(p), 0, n * sizeof(T)); }

/// An empty (null) strided view: passed where a kernel should skip a gradient.
template <class T> inline RowMapS<T> no_grad(Eigen::Index r, Eigen::Index c) { return RowMapS<T>(nullptr, r, c, Eigen::OuterStride<>(c)); }

}  // namespace fbt
