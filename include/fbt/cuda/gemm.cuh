// fbt/cuda/gemm.cuh: the matrix products on the GPU, through cuBLAS (fp32, TF32, bf16 with fp32 accumulation).
//
// Same contract as fbt::gemm (ops/gemm.hpp): row-major C (M, N) = alpha op(A) op(B) (+ C when
// accumulate), op(X) = X or X^T, every matrix given by a pointer and a leading dimension (its row
// stride), so half of a (D, 2D) fuser matrix or one head of a (BT, NH*hs) activation needs no copy.
// cuBLAS is column-major: a row-major X is the column-major X^T with the same leading dimension, so
//   C^T (N, M) = op(B)^T op(A)^T
// is one cublasGemmEx call with the operands swapped (llm.c's matmul_forward does the same).
// Precision modes: fp32 (CUBLAS_COMPUTE_32F, no tensor-core shortcut: the mode the tests compare with
// the CPU at 1e-4), tf32 (CUBLAS_COMPUTE_32F_FAST_TF32), bf16 (operands rounded to bf16, products
// accumulated in fp32, result fp32; the tests allow 1e-2). gemm_bf16 takes operands already in bf16.
// CUDA-only: include from .cu translation units.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>

#include "buffer.cuh"

namespace fbt {
namespace cuda {

enum class GemmMode { fp32, tf32, bf16 };

inline const char* gemm_mode_name(GemmMode m) { return m == GemmMode::fp32 ? "fp32" : m == GemmMode::tf32 ? "tf32" : "bf16"; }
inline GemmMode parse_gemm_mode(const std::string& s) {
  if (s == "fp32") return GemmMode::fp32;
  if (s == "tf32") return GemmMode::tf32;
  if (s == "bf16") return GemmMode::bf16;
  throw Error("unknown GEMM mode \"" + s + "\" (expected fp32, tf32 or bf16)");
}

/// A cuBLAS handle bound to one stream (RAII, move-only).
class Blas {
 public:
  explicit Blas(cudaStream_t stream = nullptr) {
    FBT_CUBLAS_CHECK(cublasCreate(&h_));
    FBT_CUBLAS_CHECK(cublasSetStream(h_, stream));
    // fp32 products stay fp32 unless a mode asks otherwise (no implicit TF32)
    FBT_CUBLAS_CHECK(cublasSetMathMode(h_, CUBLAS_DEFAULT_MATH));
  }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  Blas(Blas&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  Blas& operator=(Blas&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Blas() {
    if (h_) cublasDestroy(h_);
  }
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

namespace detail {

inline void gemm_check_shape(long M, long N, long K, long lda, long ldb, long ldc, bool transA, bool transB) {
  FBT_ASSERT(M >= 0 && N >= 0 && K >= 0, "cuda gemm: negative size");
  FBT_ASSERT(ldc >= N && lda >= (transA ? M : K) && ldb >= (transB ? K : N),
             "cuda gemm: leading dimension too small (M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                 " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) + " ldc=" + std::to_string(ldc) + ")");
}

/// One row-major product through cublasGemmEx with the given operand type and compute type.
inline void gemm_ex(const Blas& blas, float* C, long ldc, const void* A, long lda, bool transA, const void* B, long ldb, bool transB,
                    long M, long N, long K, bool accumulate, float alpha, cudaDataType_t ab_type, cublasComputeType_t compute) {
  gemm_check_shape(M, N, K, lda, ldb, ldc, transA, transB);
  if (M == 0 || N == 0) return;
  const float beta = accumulate ? 1.0f : 0.0f;
  if (K == 0) {  // C = beta C: cuBLAS handles k = 0 by scaling C
    FBT_CUBLAS_CHECK(cublasGemmEx(blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(M), 0, &alpha, B, ab_type, int(ldb), A, ab_type,
                                  int(lda), &beta, C, CUDA_R_32F, int(ldc), compute, CUBLAS_GEMM_DEFAULT));
    return;
  }
  // column-major C^T (N, M) = op(B)^T (N, K) op(A)^T (K, M); a row-major operand read column-major is its transpose
  const cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N, opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  FBT_CUBLAS_CHECK(cublasGemmEx(blas.get(), opB, opA, int(N), int(M), int(K), &alpha, B, ab_type, int(ldb), A, ab_type, int(lda),
                                &beta, C, CUDA_R_32F, int(ldc), compute, CUBLAS_GEMM_DEFAULT));
}

/// dst (rows, cols) contiguous bf16 = src (rows, cols) with row stride ld, rounded to nearest even.
/// (Kernels in these headers are templates: a header-only kernel must not be a duplicate symbol in two TUs.)
template <class S> __global__ void f32_to_bf16_kernel(__nv_bfloat16* dst, const S* src, long rows, long cols, long ld) {
  const long n = rows * cols;
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16(float(src[(i / cols) * ld + i % cols]));
}

}  // namespace detail

/// \brief Row-major C (M, N) = alpha op(A) op(B) (+ C), fp32 operands, fp32 accumulation (tf32: tensor cores).
/// A is (M, K) (or (K, M) when transA) with row stride lda; B (K, N) (or (N, K)) with ldb; C row stride ldc.
inline void gemm(const Blas& blas, float* C, long ldc, const float* A, long lda, bool transA, const float* B, long ldb, bool transB, long M,
                 long N, long K, bool accumulate, float alpha = 1.0f, bool tf32 = false) {
  detail::gemm_ex(blas, C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, alpha, CUDA_R_32F,
                  tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
}

/// \brief As gemm, with bf16 operands (contiguous or strided like the fp32 ones) and fp32 C and accumulation.
inline void gemm_bf16(const Blas& blas, float* C, long ldc, const __nv_bfloat16* A, long lda, bool transA, const __nv_bfloat16* B, long ldb,
                      bool transB, long M, long N, long K, bool accumulate, float alpha = 1.0f) {
  detail::gemm_ex(blas, C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, alpha, CUDA_R_16BF, CUBLAS_COMPUTE_32F);
}

/// \brief dst (rows, cols) contiguous bf16 from an fp32 (rows, cols) matrix with row stride ld.
inline void to_bf16(__nv_bfloat16* dst, const float* src, long rows, long cols, long ld, cudaStream_t stream) {
  const long n = rows * cols;
  if (n == 0) return;
  const int threads = 256;
  const long blocks = std::min<long>((n + threads - 1) / threads, 65536);
  detail::f32_to_bf16_kernel<float><<<unsigned(blocks), threads, 0, stream>>>(dst, src, rows, cols, ld);
  FBT_CUDA_CHECK_LAUNCH("f32_to_bf16_kernel");
}

/// The product used by the model in a chosen precision. bf16 rounds both operands into scratch it owns
/// (grown on the first product of a size, so a repeated step allocates nothing) before the product.
class GemmEngine {
 public:
  GemmEngine(cudaStream_t stream, GemmMode mode) : blas_(stream), stream_(stream), mode_(mode) {}
  GemmMode mode() const { return mode_; }
  void set_mode(GemmMode m) { mode_ = m; }
  const Blas& blas() const { return blas_; }

  /// Same arguments as gemm().
  void operator()(float* C, long ldc, const float* A, long lda, bool transA, const float* B, long ldb, bool transB, long M, long N, long K,
                  bool accumulate, float alpha = 1.0f) {
    if (mode_ != GemmMode::bf16 || M == 0 || N == 0 || K == 0)
      return gemm(blas_, C, ldc, A, lda, transA, B, ldb, transB, M, N, K, accumulate, alpha, mode_ == GemmMode::tf32);
    detail::gemm_check_shape(M, N, K, lda, ldb, ldc, transA, transB);
    const long ar = transA ? K : M, ac = transA ? M : K, br = transB ? N : K, bc = transB ? K : N;  // stored shapes
    a16_.reserve(std::size_t(ar * ac)), b16_.reserve(std::size_t(br * bc));
    to_bf16(a16_.data(), A, ar, ac, lda, stream_);
    to_bf16(b16_.data(), B, br, bc, ldb, stream_);
    gemm_bf16(blas_, C, ldc, a16_.data(), ac, transA, b16_.data(), bc, transB, M, N, K, accumulate, alpha);
  }

 private:
  Blas blas_;
  cudaStream_t stream_;
  GemmMode mode_;
  DeviceBuffer<__nv_bfloat16> a16_, b16_;
};

}  // namespace cuda
}  // namespace fbt
