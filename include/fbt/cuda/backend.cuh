// fbt/cuda/backend.cuh: fbt::cuda::CudaBackend, the backend contract of backend/backend.hpp on an NVIDIA
// GPU: device memory, one stream, cuBLAS (gemm.cuh) and the kernels of kernels.cuh.
//
// The K-pass step, the passes, the optimizer and the decoder are the library's own, written once over
// a backend (model/, train/, decode/); this class only supplies memory and kernels, with the same member
// names and signatures as fbt::CpuBackend<float> (backend/cpu.hpp). Use it through
// fbt::BackendModel<M, CudaBackend> and fbt::Decoder<M, CudaBackend> (cuda/cuda.cuh).
//
// Every operation is asynchronous on the backend's stream except download() and the reductions that
// return a double (softmax_xent_forward, sum_squares, masked_*), which synchronise to hand the host its
// result. Uploads from pageable host memory return once the data is staged, so the host buffer may be
// reused at once (CUDA semantics).
// Attention keeps the logsumexp (B, NH, T) for backward and recomputes the probabilities tile by tile
// (kernels.cuh), as the CPU does (ops/attention.hpp).
// CUDA-only: include from .cu translation units.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "../backend/backend.hpp"
#include "buffer.cuh"
#include "device.cuh"
#include "gemm.cuh"
#include "kernels.cuh"

namespace fbt {
namespace cuda {

class CudaBackend {
 public:
  using Scalar = float;
  template <class U> using Buf = DeviceBuffer<U>;
  static constexpr const char* name = "cuda";

  /// \param mode   precision of the matrix products (fp32: the mode checked against the CPU at 1e-4)
  /// \param device the CUDA device to use (-1: the current one)
  explicit CudaBackend(GemmMode mode = GemmMode::fp32, int device = -1) {
    if (!device_available()) throw Error("fbt: " + no_device_reason());
    if (device >= 0) FBT_CUDA_CHECK(cudaSetDevice(device));
    FBT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    gemm_ = std::make_unique<GemmEngine>(stream_, mode);
    acc_.resize(2);
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
    if (n && dst != src) FBT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyDeviceToDevice, stream_));
  }
  template <class U> void zero(U* p, std::size_t n) {
    if (n) FBT_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(U), stream_));
  }
  void sync() { FBT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  // ---- products -------------------------------------------------------------------------------
  /// C (M, N) = op(A) op(B) (+ C) through cuBLAS in the backend's GemmMode.
  void gemm(float* C, long ldc, const float* A, long lda, bool tA, const float* B, long ldb, bool tB, long M, long N, long K, bool acc) {
    (*gemm_)(C, ldc, A, lda, tA, B, ldb, tB, M, N, K, acc);
  }

  // ---- normalisation, rotation, attention -------------------------------------------------------
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int R, int C, float eps) {
    cuda::rmsnorm_forward(out, rstd, inp, w, R, C, eps, stream_);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, const float* rstd, int R, int C) {
    cuda::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, R, C, stream_);
  }
  void rope_forward(float* out, const float* inp, const int* pos, const RopeView<float>& tab, int R, int NH) {
    cuda::rope_forward(out, inp, pos, tab, R, NH, stream_);
  }
  void rope_backward(float* dinp, const float* dout, const int* pos, const RopeView<float>& tab, int R, int NH) {
    cuda::rope_backward(dinp, dout, pos, tab, R, NH, stream_);
  }
  /// The state is the logsumexp of each query row's scaled scores, (B, NH, T).
  static std::size_t attention_state_size(int B, int T, int NH) { return std::size_t(B) * NH * T; }
  /// The scratch is Dt = rowsum(dO * O), (B, NH, T).
  static std::size_t attention_scratch_size(int B, int T, int NH) { return std::size_t(B) * NH * T; }
  void attention_forward(float* out, float* state, const float* q, const float* k, const float* v, const int* first, int B, int T, int NH, int NKV,
                         int hs) {
    cuda::attention_forward(out, state, q, k, v, first, B, T, NH, NKV, hs, stream_);
  }
  /// The kernels accumulate into dq, dk, dv (as the contract says); scratch is overwritten.
  void attention_backward(float* dq, float* dk, float* dv, float* scratch, const float* dout, const float* out, const float* state, const float* q,
                          const float* k, const float* v, const int* first, int B, int T, int NH, int NKV, int hs) {
    cuda::attention_backward(dq, dk, dv, scratch, dout, out, state, q, k, v, first, B, T, NH, NKV, hs, stream_);
  }
  void attention_decode(float* out, const float* q, const float* const* kc, const float* const* vc, const int* len1, int max_len1, int R, int NH,
                        int NKV, int hs) {
    cuda::attention_decode(out, q, kc, vc, len1, max_len1, R, NH, NKV, hs, stream_);
  }
  void kv_append(float* const* kc, float* const* vc, const float* k, const float* v, const int* pos, int R, int KD) {
    cuda::kv_append(kc, vc, k, v, pos, R, KD, stream_);
  }
  void gather_rows(float* dst, const float* const* src, const float* mask, int R, int C) { cuda::gather_rows(dst, src, mask, R, C, stream_); }
  void scatter_rows(float* const* dst, const float* src, int R, int C) { cuda::scatter_rows(dst, src, R, C, stream_); }

  // ---- elementwise ------------------------------------------------------------------------------
  void swiglu_forward(float* h, const float* g, const float* u, std::size_t n) { cuda::swiglu_forward(h, g, u, n, stream_); }
  void swiglu_backward(float* dg, float* du, const float* dh, const float* g, const float* u, std::size_t n) {
    cuda::swiglu_backward(dg, du, dh, g, u, n, stream_);
  }
  void sigmoid_gate_forward(float* y, const float* a, const float* z, std::size_t n) { cuda::sigmoid_gate_forward(y, a, z, n, stream_); }
  void sigmoid_gate_backward(float* da, float* dz, const float* dy, const float* a, const float* z, std::size_t n) {
    cuda::sigmoid_gate_backward(da, dz, dy, a, z, n, stream_);
  }
  void mul(float* y, const float* a, const float* b, std::size_t n) { cuda::mul(y, a, b, n, stream_); }
  void mul_add(float* y, const float* a, const float* b, std::size_t n) { cuda::mul_add(y, a, b, n, stream_); }
  void mul_backward(float* da, float* db, const float* dy, const float* a, const float* b, std::size_t n) {
    cuda::mul_backward(da, db, dy, a, b, n, stream_);
  }
  void scale_groups(float* y, const float* x, const float* s, int R, int G, int C) { cuda::scale_groups(y, x, s, R, G, C, stream_); }
  void scale_groups_backward(float* dx, float* ds, const float* dy, const float* x, const float* s, int R, int G, int C) {
    cuda::scale_groups_backward(dx, ds, dy, x, s, R, G, C, stream_);
  }
  void sigmoid(float* y, const float* z, std::size_t n) { cuda::sigmoid(y, z, n, stream_); }
  void sigmoid_backward(float* dz, const float* dy, const float* y, std::size_t n) { cuda::sigmoid_backward(dz, dy, y, n, stream_); }
  void axpby(float* y, float a, const float* x, float b, std::size_t n) { cuda::axpby(y, a, x, b, n, stream_); }
  void add(float* y, const float* x, std::size_t n) { cuda::axpby(y, 1.f, x, 1.f, n, stream_); }
  void scale(float* x, double s, std::size_t n) { cuda::scale_inplace(x, s, n, stream_); }
  void copy_plain_rows(float* dst, const float* src, const float* mask, int R, int C) { cuda::copy_plain_rows(dst, src, mask, R, C, stream_); }
  void move_plain_rows(float* dst, float* src, const float* mask, int R, int C) { cuda::move_plain_rows(dst, src, mask, R, C, stream_); }
  void shift_right_forward(float* out, const float* inp, int B, int T, int C) { cuda::shift_right_forward(out, inp, B, T, C, stream_); }
  void shift_right_backward(float* dinp, const float* dout, int B, int T, int C) { cuda::shift_right_backward(dinp, dout, B, T, C, stream_); }
  /// V is unused: the ids were checked against the vocabulary on the host.
  void embedding_forward(float* out, const int* tokens, const float* E, int N, int /*V*/, int C) {
    cuda::embedding_forward(out, tokens, E, N, C, stream_);
  }
  void embedding_backward(float* dE, const float* dout, const int* tokens, int N, int /*V*/, int C) {
    cuda::embedding_backward(dE, dout, tokens, N, C, stream_);
  }
  void bias_forward(float* out, const float* b, int R, int C) { cuda::bias_forward(out, b, R, C, stream_); }
  void bias_backward(float* db, const float* dout, int R, int C) { cuda::bias_backward(db, dout, R, C, stream_); }
  void jitter_add(float* out, const float* src, std::uint64_t seed, int row_offset, int B, std::size_t row_len, double sigma) {
    cuda::jitter_add(out, src, seed, row_offset, B, row_len, sigma, stream_);
  }

  // ---- loss, optimizer, reductions --------------------------------------------------------------
  /// Returns the sum of the losses: the (N) losses are downloaded and summed in double on the host, in
  /// index order (ignored rows hold 0).
  double softmax_xent_forward(float* logits, float* losses, float* lse, const int* targets, int N, int V, double z) {
    cuda::softmax_xent_forward(logits, losses, lse, targets, N, V, z, stream_);
    losses_h_.resize(std::size_t(N));
    download(losses_h_.data(), losses, std::size_t(N));
    double sum = 0.0;
    for (float l : losses_h_) sum += double(l);
    return sum;
  }
  void softmax_xent_backward(float* probs, const float* lse, const int* targets, int N, int V, double scale, double z) {
    cuda::softmax_xent_backward(probs, lse, targets, N, V, scale, z, stream_);
  }
  void adamw(float* p, const float* g, float* m, float* v, std::size_t n, const AdamWRates<float>& r, float wd) {
    cuda::adamw_update_tensor(p, g, m, v, n, r, wd, stream_);
  }
  void row_sumsq(float* out, const float* x, int R, int C) { cuda::row_sumsq(out, x, R, C, stream_); }
  void row_div_sqrt(float* x, const float* v, int R, int C, float eps) { cuda::row_div_sqrt(x, v, R, C, eps, stream_); }
  /// sum x^2 in double (accumulated on the device; the order of the atomic adds is not fixed).
  double sum_squares(const float* x, std::size_t n) {
    zero(acc_.data(), 2);
    cuda::sum_squares(acc_.data(), x, n, stream_);
    return result().first;
  }
  double masked_sumsq(const float* x, const float* mask, int R, int C) {
    zero(acc_.data(), 2);
    cuda::masked_sumsq(acc_.data(), x, mask, R, C, stream_);
    return result().first;
  }
  double masked_diff_sumsq(const float* a, const float* b, const float* mask, int R, int C) {
    zero(acc_.data(), 2);
    cuda::masked_diff_sumsq(acc_.data(), a, b, mask, R, C, stream_);
    return result().first;
  }
  std::pair<double, double> masked_sigmoid_moments(const float* z, const float* mask, int R, int C) {
    zero(acc_.data(), 2);
    cuda::masked_sigmoid_moments(acc_.data(), z, mask, R, C, stream_);
    return result();
  }

 private:
  /// The two accumulators (zeroed before the reduction), downloaded: waits for it.
  std::pair<double, double> result() {
    double a[2];
    download(a, acc_.data(), 2);
    return {a[0], a[1]};
  }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GemmEngine> gemm_;
  DeviceBuffer<double> acc_;       // (2) the reductions' accumulators
  std::vector<float> losses_h_;    // (N) host staging of softmax_xent_forward's losses
};

}  // namespace cuda
}  // namespace fbt
