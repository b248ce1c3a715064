// fbt/core/tensor.hpp: row-major Eigen views over memory that fbt owns.
//
// fbt never names Eigen::MatrixXf (column-major). Every matrix is a RowMat / RowMap: row-major, so a
// (B, T, C) activation is the (B*T, C) matrix llm.c uses, and a weight W is PyTorch nn.Linear's
// (OC, C) layout, y = x W^T. Kernels take maps by value (a pointer and two sizes).
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "../config.hpp"

namespace fbt {

template <class T> using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T> using RowMap = Eigen::Map<RowMat<T>>;          // mutable (rows, cols) view
template <class T> using CRowMap = Eigen::Map<const RowMat<T>>;   // read-only (rows, cols) view
template <class T> using Span = Eigen::Map<Vec<T>>;               // mutable (n) view
template <class T> using CSpan = Eigen::Map<const Vec<T>>;        // read-only (n) view
/// A (rows, cols) block of a wider row-major buffer, e.g. one head's (T, hs) slice of (BT, NH*hs).
template <class T> using RowMapS = Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>>;
template <class T> using CRowMapS = Eigen::Map<const RowMat<T>, 0, Eigen::OuterStride<>>;

/// \brief An allocator of 64-byte aligned memory (a cache line, and an AVX-512 register).
/// Eigen's aligned_allocator aligns to EIGEN_MAX_ALIGN_BYTES only: 32 in a build for an AVX2 CPU, so the
/// "64-byte aligned" slices a Carver cuts would be 64-byte aligned on some CPUs and not on others.
template <class T> struct Align64Allocator {
  using value_type = T;
  static constexpr std::size_t kAlign = 64;
  Align64Allocator() noexcept = default;
  template <class U> Align64Allocator(const Align64Allocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlign)));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t(kAlign)); }
  template <class U> bool operator==(const Align64Allocator<U>&) const noexcept { return true; }
  template <class U> bool operator!=(const Align64Allocator<U>&) const noexcept { return false; }
};

/// 64-byte aligned storage; all fbt buffers use it so Eigen's vectorised paths apply.
template <class T> using AlignedVector = std::vector<T, Align64Allocator<T>>;

template <class T> inline RowMap<T> mat(T* p, Eigen::Index r, Eigen::Index c) { return RowMap<T>(p, r, c); }
template <class T> inline CRowMap<T> cmat(const T* p, Eigen::Index r, Eigen::Index c) { return CRowMap<T>(p, r, c); }
template <class T> inline Span<T> vec(T* p, Eigen::Index n) { return Span<T>(p, n); }
template <class T> inline CSpan<T> cvec(const T* p, Eigen::Index n) { return CSpan<T>(p, n); }
/// Strided (r, c) view starting at p whose rows are `stride` elements apart.
/// (stride defaults to c: a contiguous matrix as a strided view, so one kernel serves both.)
template <class T> inline RowMapS<T> smat(T* p, Eigen::Index r, Eigen::Index c, Eigen::Index stride = -1) {
  return RowMapS<T>(p, r, c, Eigen::OuterStride<>(stride < 0 ? c : stride));
}
template <class T> inline CRowMapS<T> csmat(const T* p, Eigen::Index r, Eigen::Index c, Eigen::Index stride = -1) {
  return CRowMapS<T>(p, r, c, Eigen::OuterStride<>(stride < 0 ? c : stride));
}
/// Read-only view of a mutable map (Eigen has no implicit Map<M> -> Map<const M> conversion).
template <class T> inline CRowMap<T> cview(const RowMap<T>& m) { return CRowMap<T>(m.data(), m.rows(), m.cols()); }

/// A tensor shape, outermost axis first (row-major), as in safetensors and numpy.
using Shape = std::vector<std::int64_t>;
inline std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

}  // namespace fbt
