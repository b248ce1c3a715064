// fbt/cuda/buffer.cuh: RAII device memory over plain cudaMalloc (no managed memory, no pools).
//
// DeviceBuffer<T> owns n elements of device memory; it is move-only, frees in its destructor (errors
// there are ignored: a destructor must not throw), and offers checked copies to and from the host.
// CUDA-only: include from .cu translation units.
#pragma once

#include <cstddef>
#include <utility>

#include "check.cuh"

namespace fbt {
namespace cuda {

template <class T> class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr), n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  /// Reallocates to exactly n elements (contents are lost; new memory is NOT zeroed).
  void resize(std::size_t n) {
    if (n == n_) return;
    release();
    if (n > 0) FBT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    n_ = n;
  }
  /// Grows to at least n elements (never shrinks).
  void reserve(std::size_t n) {
    if (n > n_) resize(n);
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

 private:
  void release() noexcept {
    if (p_) cudaFree(p_);
    p_ = nullptr, n_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace cuda
}  // namespace fbt
