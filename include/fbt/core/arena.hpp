// fbt/core/arena.hpp: one allocation carved into named slices (llm.c's malloc_and_point_*).
//
// A training step must not allocate (first touch of a fresh page costs ~12 us here). Caches are laid
// out by running the same layout function twice over a Carver: once to count (no base: every slice is
// null), once to point into one buffer. The buffer is a backend's (fbt::CpuBackend's host memory, or a
// GPU's), so the same layout code serves every backend; it is rebuilt only when the shape changes.
//
// Regions: a layout may give several users one region that they share in turn (the temporaries every
// layer recomputes, the gradient scratch of a backward that runs one layer at a time). Each user carves
// its slices from a fresh Carver at the region's base (Carver::region), and the region takes the largest
// of their sizes (Carver::claim), so layers of different widths share it.
#pragma once

#include <algorithm>
#include <cstddef>

#include "tensor.hpp"

namespace fbt {

template <class T> struct Carver {
  static constexpr std::size_t kAlign = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;  ///< elements per 64 bytes
  T* base = nullptr;      ///< null while counting
  std::size_t used = 0;   ///< elements taken so far (rounded up to 64 bytes per slice)

  static std::size_t round_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  /// A slice of n elements, 64-byte aligned when the base is; nullptr while counting.
  T* take(std::size_t n) {
    T* p = base ? base + used : nullptr;
    used += round_up(n);
    return p;
  }
  /// A carver for a region that starts here (its users carve from it in turn; see claim).
  Carver region() const { return Carver{base ? base + used : nullptr, 0}; }
  /// Reserves `elements` for a region whose users have been carved (the largest of their sizes).
  void claim(std::size_t elements) { used += round_up(elements); }
};

/// \brief A layout with a shared region of temporaries: every user carves its own slices from `keep`,
/// and its temporaries from `temp()` (a fresh carver at the region's base), then reports them with
/// `done(t)`; the region is as large as the largest user's temporaries.
template <class T> struct Regions {
  Carver<T> keep;            ///< slices that belong to one user
  T* temp_base = nullptr;    ///< the shared temporaries (null while counting)
  std::size_t temp_max = 0;  ///< the largest user's temporaries so far
  Carver<T> temp() const { return Carver<T>{temp_base, 0}; }
  void done(const Carver<T>& t) { temp_max = std::max(temp_max, t.used); }
  std::size_t total() const { return keep.used + Carver<T>::round_up(temp_max); }
};

/// \brief Lays out buf with `layout(Regions<T>&)` (run twice: count, then point; the temporaries follow
/// the kept slices). Grows buf when needed. Returns the number of elements used.
template <class T, class Buf, class Layout> std::size_t lay_out_regions(Buf& buf, Layout&& layout) {
  Regions<T> count;
  layout(count);
  const std::size_t need = count.total();
  if (need > buf.size()) buf.resize(need);
  Regions<T> point;
  point.keep.base = buf.data();
  point.temp_base = buf.data() + count.keep.used;
  layout(point);
  return need;
}
/// \brief Elements a Regions layout takes, without allocating.
template <class T, class Layout> std::size_t measure_regions(Layout&& layout) {
  Regions<T> count;
  layout(count);
  return count.total();
}

/// \brief Lays out buf with `layout(Carver<T>&)` (run twice: count, then point). The buffer grows when
/// needed (Buf::resize), which on a CPU backend zero-fills it and so touches every page here, not in a
/// step. Returns the number of elements used.
template <class T, class Buf, class Layout> std::size_t lay_out(Buf& buf, Layout&& layout) {
  Carver<T> count;
  layout(count);
  if (count.used > buf.size()) buf.resize(count.used);
  Carver<T> point{buf.data(), 0};
  layout(point);
  return point.used;
}

/// \brief Elements `layout` takes, without allocating (what a step will need, said before it runs).
template <class T, class Layout> std::size_t measure_layout(Layout&& layout) {
  Carver<T> count;
  layout(count);
  return count.used;
}

}  // namespace fbt
