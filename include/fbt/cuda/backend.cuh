// fbt/cuda/backend.cuh: the CUDA backend of the engine (engine.cuh): device memory, one stream, cuBLAS
// and the kernels of kernels.cuh behind the small set of operations the engine calls.
//
// Every operation is asynchronous on the backend's stream except download() (which synchronises, so
// the host data is ready when it returns) and the constructor. Uploads from pageable host memory
// return once the data is staged, so the host buffer may be reused at once (CUDA semantics).
// CUDA-only: include from .cu translation units.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "buffer.cuh"
#include "device.cuh"
#include "gemm.cuh"
#include "kernels.cuh"

namespace fbt {
namespace cuda {

class CudaBackend {
 public:
  template <class U> using Buf = DeviceBuffer<U>;

  /// \param mode   precision of the matrix products (fp32: the mode checked against the CPU at 1e-4)
  /// \param device the CUDA device to use (-1: the current one)
  explicit CudaBackend(GemmMode mode = GemmMode::fp32, int device = -1) {
    if (!device_available()) throw Error("fbt: " + no_device_reason());
    if (device >= 0) FBT_CUDA_CHECK(cudaSetDevice(device));
    FBT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    gemm_ = std::make_unique<GemmEngine>(stream_, mode);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  ~CudaBackend() {
    gemm_.reset();
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }
  cudaStream_t stream() const { return stream_; }
  GemmMode gemm_mode() const { return gemm_->mode(); }
  void set_gemm_mode(GemmMode m) { gemm_->set_mode(m); }

  // ---- memory ---------------------------------------------------------------------------------
  template <class U> void upload(U* dst, const U* src, std::size_t n) {
    if (n) FBT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyHostToDevice, stream_));
  }
  template <class U> void download(U* dst, const U* src, std::size_t n) {
    if (n) FBT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyDeviceToHost, stream_));
    FBT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  template <class U> void copy(U* dst, const U* src, std::size_t n) {
    if (n) FBT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyDeviceToDevice, stream_));
  }
  template <class U> void zero(U* p, std::size_t n) {
    if (n) FBT_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(U), stream_));
  }
  /// Fills with all-ones bytes (a NaN for floats): the tests poison outputs with it.
  template <class U> void poison(U* p, std::size_t n) {
    if (n) FBT_CUDA_CHECK(cudaMemsetAsync(p, 0xFF, n * sizeof(U), stream_));
  }
  void sync() { FBT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  // ---- products -------------------------------------------------------------------------------
  void gemm(float* C, long ldc, const float* A, long lda, bool tA, const float* B, long ldb, bool tB, long M, long N, long K, bool acc) {
    (*gemm_)(C, ldc, A, lda, tA, B, ldb, tB, M, N, K, acc);
  }

  // ---- kernels (kernels.cuh) ------------------------------------------------------------------
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int R, int C, float eps) {
    cuda::rmsnorm_forward(out, rstd, inp, w, R, C, eps, stream_);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, const float* rstd, int R, int C) {
    cuda::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, R, C, stream_);
  }
  void rope_forward(float* out, const float* inp, const int* pos, const float* c, const float* s, int R, int NH, int hs) {
    cuda::rope_forward(out, inp, pos, c, s, R, NH, hs, stream_);
  }
  void rope_backward(float* dinp, const float* dout, const int* pos, const float* c, const float* s, int R, int NH, int hs) {
    cuda::rope_backward(dinp, dout, pos, c, s, R, NH, hs, stream_);
  }
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, const int* first, int B, int T, int NH, int NKV,
                         int hs) {
    cuda::attention_forward(out, lse, q, k, v, first, B, T, NH, NKV, hs, stream_);
  }
  void attention_backward(float* dq, float* dk, float* dv, float* Dt, const float* dout, const float* out, const float* lse, const float* q,
                          const float* k, const float* v, const int* first, int B, int T, int NH, int NKV, int hs) {
    cuda::attention_backward(dq, dk, dv, Dt, dout, out, lse, q, k, v, first, B, T, NH, NKV, hs, stream_);
  }
  void attention_decode(float* out, const float* q, const float* const* kc, const float* const* vc, const int* len1, const int* cap, int max_len1,
                        int layer, int R, int NH, int NKV, int hs) {
    cuda::attention_decode(out, q, kc, vc, len1, cap, max_len1, layer, R, NH, NKV, hs, stream_);
  }
  void kv_append(float* const* kc, float* const* vc, const float* k, const float* v, const int* pos, const int* cap, int layer, int R, int KD) {
    cuda::kv_append(kc, vc, k, v, pos, cap, layer, R, KD, stream_);
  }
  void gather_rows(float* dst, const float* const* src, const float* mask, int R, int C) { cuda::gather_rows(dst, src, mask, R, C, stream_); }
  void scatter_rows(float* const* dst, const float* src, int R, int C) { cuda::scatter_rows(dst, src, R, C, stream_); }
  void swiglu_forward(float* h, const float* g, const float* u, std::size_t n) { cuda::swiglu_forward(h, g, u, n, stream_); }
  void swiglu_backward(float* dg, float* du, const float* dh, const float* g, const float* u, std::size_t n) {
    cuda::swiglu_backward(dg, du, dh, g, u, n, stream_);
  }
  void sigmoid_gate_forward(float* y, const float* a, const float* z, std::size_t n) { cuda::sigmoid_gate_forward(y, a, z, n, stream_); }
  void sigmoid_gate_backward(float* da, float* dz, const float* dy, const float* a, const float* z, std::size_t n) {
    cuda::sigmoid_gate_backward(da, dz, dy, a, z, n, stream_);
  }
  void axpby(float* y, float a, const float* x, float b, std::size_t n) { cuda::axpby(y, a, x, b, n, stream_); }
  void add(float* y, const float* x, std::size_t n) { cuda::axpby(y, 1.f, x, 1.f, n, stream_); }
  void copy_plain_rows(float* dst, const float* src, const float* mask, int R, int C) { cuda::copy_plain_rows(dst, src, mask, R, C, stream_); }
  void move_plain_rows(float* dst, float* src, const float* mask, int R, int C) { cuda::move_plain_rows(dst, src, mask, R, C, stream_); }
  void shift_right_forward(float* out, const float* inp, int B, int T, int C) { cuda::shift_right_forward(out, inp, B, T, C, stream_); }
  void shift_right_backward(float* dinp, const float* dout, int B, int T, int C) { cuda::shift_right_backward(dinp, dout, B, T, C, stream_); }
  void embedding_forward(float* out, const int* tokens, const float* E, int N, int C) { cuda::embedding_forward(out, tokens, E, N, C, stream_); }
  void embedding_backward(float* dE, const float* dout, const int* tokens, int N, int C) {
    cuda::embedding_backward(dE, dout, tokens, N, C, stream_);
  }
  void bias_forward(float* out, const float* b, int R, int C) { cuda::bias_forward(out, b, R, C, stream_); }
  void bias_backward(float* db, const float* dout, int R, int C) { cuda::bias_backward(db, dout, R, C, stream_); }
  void softmax_xent_forward(float* logits, float* losses, float* lse, const int* targets, int N, int V, double z) {
    cuda::softmax_xent_forward(logits, losses, lse, targets, N, V, z, stream_);
  }
  void softmax_xent_backward(float* probs, const float* lse, const int* targets, int N, int V, double scale, double z) {
    cuda::softmax_xent_backward(probs, lse, targets, N, V, scale, z, stream_);
  }
  void adamw(float* p, const float* g, float* m, float* v, std::size_t n, const std::array<float, 8>& r, float wd) {
    cuda::adamw_update_tensor(p, g, m, v, n, AdamWRates{r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]}, wd, stream_);
  }
  void jitter_add(float* out, const float* src, std::uint64_t seed, int row_offset, int B, std::size_t row_len, double sigma) {
    cuda::jitter_add(out, src, seed, row_offset, B, row_len, sigma, stream_);
  }
  void sum_squares(double* acc, const float* x, std::size_t n) { cuda::sum_squares(acc, x, n, stream_); }
  void scale(float* x, double s, std::size_t n) { cuda::scale_inplace(x, s, n, stream_); }
  void feedback_stats(double* acc, const float* S, const float* pe, const float* e, const float* u, const float* mask, int R, int C, int kind) {
    cuda::feedback_stats(acc, S, pe, e, u, mask, R, C, kind, stream_);
  }

 private:
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GemmEngine> gemm_;
};

}  // namespace cuda
}  // namespace fbt
