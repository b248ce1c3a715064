// fbt/core/arena.hpp: one allocation carved into named slices (llm.c's malloc_and_point_*).
//
// A training step must not allocate (first touch of a fresh page costs ~12 us here). Caches are laid
// out by running the same layout function twice: once to count (dry run, slices are null), once to
// point into one buffer (zero-filled whenever it is (re)allocated). The arena is rebuilt only when the shape changes.
#pragma once

#include <cstring>
#include <functional>

#include "tensor.hpp"

namespace fbt {

template <class T> class Arena {
 public:
  static constexpr std::size_t kAlign = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;  // elements per 64 bytes

  /// Lay out the arena: `layout(*this)` is called twice and must make the same take() calls both times.
  void build(const std::function<void(Arena&)>& layout) {
    dry_ = true;
    used_ = 0;
    layout(*this);
    const std::size_t need = used_;
    if (need > buf_.size()) {
      buf_.clear();
      buf_.shrink_to_fit();
      buf_.assign(need, T(0));  // touch every page once, here, not inside a step
    }
    dry_ = false;
    used_ = 0;
    layout(*this);
  }
  /// Elements that `layout` would take, without allocating (what a step will need, said before it runs).
  static std::size_t measure(const std::function<void(Arena&)>& layout) {
    Arena a;
    a.dry_ = true;
    layout(a);
    return a.used_;
  }
  /// A slice of n elements (64-byte aligned); nullptr during the counting run.
  T* take(std::size_t n) {
    T* p = dry_ ? nullptr : buf_.data() + used_;
    used_ += (n + kAlign - 1) / kAlign * kAlign;
    return p;
  }
  std::size_t elements() const { return used_; }
  std::size_t bytes() const { return used_ * sizeof(T); }
  std::size_t capacity_bytes() const { return buf_.size() * sizeof(T); }

 private:
  AlignedVector<T> buf_;
  std::size_t used_ = 0;
  bool dry_ = false;
};

}  // namespace fbt
