// fbt/cuda/check.cuh: every CUDA runtime and cuBLAS call is checked.
//
// A failure throws fbt::Error naming the call as written in the source, the file and line, and the
// library's own message (cudaGetErrorName + cudaGetErrorString, or cublasGetStatusName/String), as
// llm.c's cudaCheck / cublasCheck do, except that fbt throws instead of exiting so that a caller (or a
// test) can recover, e.g. fall back to the CPU path. A kernel launch is checked with
// FBT_CUDA_CHECK_LAUNCH("name") right after it (cudaGetLastError: bad configuration, missing kernel image).
// CUDA-only: include from .cu translation units.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "../config.hpp"

namespace fbt {
namespace cuda {
namespace detail {

[[noreturn]] inline void cuda_fail(cudaError_t e, const char* call, const char* file, int line) {
  throw Error(std::string("fbt: CUDA call `") + call + "` failed at " + file + ":" + std::to_string(line) + ": " +
              cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
[[noreturn]] inline void cublas_fail(cublasStatus_t s, const char* call, const char* file, int line) {
  throw Error(std::string("fbt: cuBLAS call `") + call + "` failed at " + file + ":" + std::to_string(line) + ": " +
              cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
}

}  // namespace detail
}  // namespace cuda
}  // namespace fbt

/// FBT_CUDA_CHECK(call): throws fbt::Error "CUDA call `call` failed at file:line: cudaErrorX: message".
#define FBT_CUDA_CHECK(call)                                                              \
  do {                                                                                    \
    const cudaError_t fbt_cuda_err_ = (call);                                             \
    if (fbt_cuda_err_ != cudaSuccess) ::fbt::cuda::detail::cuda_fail(fbt_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

/// FBT_CUBLAS_CHECK(call): throws fbt::Error naming the cuBLAS call and its status.
#define FBT_CUBLAS_CHECK(call)                                                            \
  do {                                                                                    \
    const cublasStatus_t fbt_cublas_st_ = (call);                                         \
    if (fbt_cublas_st_ != CUBLAS_STATUS_SUCCESS) ::fbt::cuda::detail::cublas_fail(fbt_cublas_st_, #call, __FILE__, __LINE__); \
  } while (0)

/// FBT_CUDA_CHECK_LAUNCH(name): checks the kernel launch just made (launch errors, not execution errors:
/// those surface at the next synchronising call, which is checked too).
#define FBT_CUDA_CHECK_LAUNCH(name)                                                       \
  do {                                                                                    \
    const cudaError_t fbt_cuda_err_ = cudaGetLastError();                                 \
    if (fbt_cuda_err_ != cudaSuccess) ::fbt::cuda::detail::cuda_fail(fbt_cuda_err_, "launch of " name, __FILE__, __LINE__); \
  } while (0)
