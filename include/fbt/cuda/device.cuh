// fbt/cuda/device.cuh: is there a CUDA device to run on? (runtime selection)
//
// device_available() never throws: no driver, a driver too old for the runtime, no device, or
// CUDA_VISIBLE_DEVICES="" all mean "no", and the caller runs the CPU path. The CUDA path is compiled
// only when fbt is configured with FBT_WITH_CUDA and nvcc is found; this header is CUDA-only (.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "check.cuh"

namespace fbt {
namespace cuda {

/// Number of usable CUDA devices (0 when the runtime or driver cannot report any). Never throws.
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error so that the next checked call does not report it
    return 0;
  }
  return n;
}

/// True when at least one CUDA device can be used. Never throws.
inline bool device_available() noexcept { return device_count() > 0; }

/// Why no device is usable ("" when one is): the runtime's message, for skips and logs.
inline std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }
  return n > 0 ? std::string() : std::string("no CUDA device: cudaGetDeviceCount reports 0 devices");
}

/// "NVIDIA H200 (sm_90, 139.8 GiB)" for the current device; throws fbt::Error when there is none.
inline std::string device_name() {
  int dev = 0;
  FBT_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  FBT_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", double(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " + mem + ")";
}

}  // namespace cuda
}  // namespace fbt
