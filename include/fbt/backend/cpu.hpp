// fbt/backend/cpu.hpp: the CPU backend: host memory and the ops/ kernels (Eigen) behind the backend
// contract of backend/backend.hpp.
//
// Every operation is a thin call into ops/ (the kernels keep their own tests there); the views the
// kernels take are built here from the contract's pointers and sizes. The backend holds no state:
// `CpuBackend<T> be;` costs nothing, and each thread of a step may have its own. T is float or double
// (the finite-difference checks run the whole step in double).
#pragma once

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "../ops/activations.hpp"
#include "../ops/attention.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/embedding.hpp"
#include "../ops/gemm_bf16.hpp"
#include "../ops/linear.hpp"
#include "../ops/rmsnorm.hpp"
#include "../ops/rope.hpp"
#include "../ops/shift.hpp"
#include "../ops/softmax_xent.hpp"
#include "../core/rng.hpp"
#include "backend.hpp"

namespace fbt {

/// Host memory for a backend buffer: 64-byte aligned; resize() zero-fills (so every page is touched
/// when a workspace is laid out, never inside a step).
template <class U> class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(std::size_t n) { resize(n); }
  void resize(std::size_t n) { v_.assign(n, U{}); }
  U* data() { return v_.data(); }
  const U* data() const { return v_.data(); }
  std::size_t size() const { return v_.size(); }

 private:
  AlignedVector<U> v_;
};

template <class T> struct CpuBackend {
  using Scalar = T;
  template <class U> using Buf = HostBuffer<U>;
  static constexpr const char* name = "cpu";

  // ---- memory ---------------------------------------------------------------------------------
  template <class U> void upload(U* dst, const U* src, std::size_t n) { copy(dst, src, n); }
  template <class U> void download(U* dst, const U* src, std::size_t n) { copy(dst, src, n); }
  template <class U> void copy(U* dst, const U* src, std::size_t n) {
    if (n && dst != src) std::memmove(static_cast<void*>(dst), static_cast<const void*>(src), n * sizeof(U));
  }
  template <class U> void zero(U* p, std::size_t n) {
    if (n) std::memset(static_cast<void*>(p), 0, n * sizeof(U));
  }
  void sync() {}

  // ---- products -------------------------------------------------------------------------------
  /// C (M, N) = op(A) op(B) (+ C). One row times a transposed weight (decoding) is a matrix-vector product.
  /// Under matmul_precision() bf16 (float only) the operands are rounded to bf16 (ops/gemm_bf16.hpp). In
  /// float, a build with oneDNN runs its kernel where it beats Eigen's (ops/gemm_dnnl.hpp: AVX-512 CPUs).
  /// A member template (of nothing): the compiled kernels (src/kernels.cpp, fbt::kernels) instantiate the
  /// class's members but not this, so these switches are always compiled in the caller's own files, with
  /// its FBT_HAVE_DNNL, even in a program that links kernels compiled without oneDNN.
  template <int = 0>
  void gemm(T* C, long ldc, const T* A, long lda, bool tA, const T* B, long ldb, bool tB, long M, long N, long K, bool acc) {
    auto Cm = smat(C, M, N, ldc);
    auto Am = tA ? csmat(A, K, M, lda) : csmat(A, M, K, lda);
    auto Bm = tB ? csmat(B, N, K, ldb) : csmat(B, K, N, ldb);
    if constexpr (std::is_same<T, float>::value) {
      if (matmul_precision() == Precision::bf16) {
        gemm_bf16(Cm, Am, tA, Bm, tB, acc);
        return;
      }
      if (!(M == 1 && !tA && tB) && gemm_f32_dnnl(Cm, Am, tA, Bm, tB, acc)) return;
    }
    gemm_fp32(Cm, Am, tA, Bm, tB, acc);
  }
  /// The product in T by Eigen (and the matrix-vector product of a decoding row): gemm without the bf16
  /// and oneDNN switches.
  void gemm_fp32(RowMapS<T> C, CRowMapS<T> A, bool tA, CRowMapS<T> B, bool tB, bool acc);

  // ---- normalisation, rotation, attention -------------------------------------------------------
  void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* w, int R, int C, T eps) {
    fbt::rmsnorm_forward(smat(out, R, C), vec(rstd, R), csmat(inp, R, C), cvec(w, C), eps);
  }
  void rmsnorm_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int R, int C) {
    fbt::rmsnorm_backward(smat(dinp, R, C), vec(dw, C), csmat(dout, R, C), csmat(inp, R, C), cvec(w, C), cvec(rstd, R));
  }
  void rope_forward(T* out, const T* inp, const int* pos, const RopeView<T>& tab, int R, int NH) {
    const int QD = NH * 2 * tab.half;
    fbt::rope_forward(smat(out, R, QD), csmat(inp, R, QD), pos, tab, NH);
  }
  void rope_backward(T* dinp, const T* dout, const int* pos, const RopeView<T>& tab, int R, int NH) {
    const int QD = NH * 2 * tab.half;
    fbt::rope_backward(smat(dinp, R, QD), csmat(dout, R, QD), pos, tab, NH);
  }
  /// The state: the logsumexp of each query row's scaled scores (B, NH, T); the scratch: Dt = rowsum(dO * O)
  /// (B, NH, T). Backward recomputes the probabilities (ops/attention.hpp), as the CUDA backend does.
  static std::size_t attention_state_size(int B, int Tn, int NH) { return std::size_t(B) * NH * Tn; }
  static std::size_t attention_scratch_size(int B, int Tn, int NH) { return std::size_t(B) * NH * Tn; }
  void attention_forward(T* out, T* state, const T* q, const T* k, const T* v, const int* first, int B, int Tn, int NH, int NKV, int hs) {
    const int N = B * Tn, QD = NH * hs, KD = NKV * hs;
    fbt::attention_forward(smat(out, N, QD), state, csmat(q, N, QD), csmat(k, N, KD), csmat(v, N, KD), first, AttnShape{B, Tn, NH, NKV, hs});
  }
  void attention_backward(T* dq, T* dk, T* dv, T* scratch, const T* dout, const T* out, const T* state, const T* q, const T* k, const T* v,
                          const int* first, int B, int Tn, int NH, int NKV, int hs) {
    const int N = B * Tn, QD = NH * hs, KD = NKV * hs;
    fbt::attention_backward(smat(dq, N, QD), smat(dk, N, KD), smat(dv, N, KD), scratch, csmat(dout, N, QD), csmat(out, N, QD), state,
                            csmat(q, N, QD), csmat(k, N, KD), csmat(v, N, KD), first, AttnShape{B, Tn, NH, NKV, hs});
  }
  void attention_decode(T* out, const T* q, const T* const* kc, const T* const* vc, const int* len1, int max_len1, int R, int NH, int NKV,
                        int hs) {
    auto& scores = decode_scores();
    if (scores.size() < std::size_t(max_len1)) scores.resize(max_len1);
    const std::size_t QD = std::size_t(NH) * hs;
    for (int r = 0; r < R; ++r) fbt::attention_decode(out + r * QD, scores.data(), q + r * QD, kc[r], vc[r], len1[r], NH, NKV, hs);
  }
  void kv_append(T* const* kc, T* const* vc, const T* k, const T* v, const int* pos, int R, int KD) {
    for (int r = 0; r < R; ++r) {
      std::copy(k + std::size_t(r) * KD, k + std::size_t(r + 1) * KD, kc[r] + std::size_t(pos[r]) * KD);
      std::copy(v + std::size_t(r) * KD, v + std::size_t(r + 1) * KD, vc[r] + std::size_t(pos[r]) * KD);
    }
  }
  void gather_rows(T* dst, const T* const* src, const T* mask, int R, int C) {
    for (int r = 0; r < R; ++r) {
      T* d = dst + std::size_t(r) * C;
      if (mask[r] != T(0)) std::copy(src[r], src[r] + C, d);
      else std::fill(d, d + C, T(0));
    }
  }
  void scatter_rows(T* const* dst, const T* src, int R, int C) {
    for (int r = 0; r < R; ++r) std::copy(src + std::size_t(r) * C, src + std::size_t(r + 1) * C, dst[r]);
  }

  // ---- elementwise ------------------------------------------------------------------------------
  void swiglu_forward(T* h, const T* g, const T* u, std::size_t n) { fbt::swiglu_forward(row(h, n), crow(g, n), crow(u, n)); }
  void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, std::size_t n) {
    fbt::swiglu_backward(row(dg, n), row(du, n), crow(dh, n), crow(g, n), crow(u, n));
  }
  void sigmoid_gate_forward(T* y, const T* a, const T* z, std::size_t n) { fbt::sigmoid_gate_forward(row(y, n), crow(a, n), crow(z, n)); }
  void sigmoid_gate_backward(T* da, T* dz, const T* dy, const T* a, const T* z, std::size_t n) {
    fbt::sigmoid_gate_backward(row(da, n), row(dz, n), crow(dy, n), crow(a, n), crow(z, n));
  }
  void mul(T* y, const T* a, const T* b, std::size_t n) { fbt::mul_forward(row(y, n), crow(a, n), crow(b, n)); }
  void mul_add(T* y, const T* a, const T* b, std::size_t n) { fbt::mul_add_forward(row(y, n), crow(a, n), crow(b, n)); }
  void mul_backward(T* da, T* db, const T* dy, const T* a, const T* b, std::size_t n) {
    fbt::mul_backward(row(da, n), row(db, n), crow(dy, n), crow(a, n), crow(b, n));
  }
  void scale_groups(T* y, const T* x, const T* s, int R, int G, int C) {
    fbt::scale_groups_forward(smat(y, R, G * C), csmat(x, R, G * C), csmat(s, R, G), C);
  }
  void scale_groups_backward(T* dx, T* ds, const T* dy, const T* x, const T* s, int R, int G, int C) {
    fbt::scale_groups_backward(smat(dx, R, G * C), smat(ds, R, G), csmat(dy, R, G * C), csmat(x, R, G * C), csmat(s, R, G), C);
  }
  void sigmoid(T* y, const T* z, std::size_t n) { fbt::sigmoid_forward(row(y, n), crow(z, n)); }
  void sigmoid_backward(T* dz, const T* dy, const T* y, std::size_t n) { fbt::sigmoid_backward(row(dz, n), crow(dy, n), crow(y, n)); }
  void axpby(T* y, T a, const T* x, T b, std::size_t n);
  void add(T* y, const T* x, std::size_t n);
  void scale(T* x, double s, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) x[i] = T(double(x[i]) * s);
  }
  void copy_plain_rows(T* dst, const T* src, const T* mask, int R, int C) {
    for (int r = 0; r < R; ++r)
      if (mask[r] == T(0)) std::copy(src + std::size_t(r) * C, src + std::size_t(r + 1) * C, dst + std::size_t(r) * C);
  }
  void move_plain_rows(T* dst, T* src, const T* mask, int R, int C);
  void shift_right_forward(T* out, const T* inp, int B, int Tn, int C) {
    fbt::shift_right_forward(smat(out, std::size_t(B) * Tn, C), csmat(inp, std::size_t(B) * Tn, C), B, Tn);
  }
  void shift_right_backward(T* dinp, const T* dout, int B, int Tn, int C) {
    fbt::shift_right_backward(smat(dinp, std::size_t(B) * Tn, C), csmat(dout, std::size_t(B) * Tn, C), B, Tn);
  }
  void embedding_forward(T* out, const int* tokens, const T* E, int N, int V, int C) {
    fbt::embedding_forward(smat(out, N, C), tokens, csmat(E, V, C));
  }
  void embedding_backward(T* dE, const T* dout, const int* tokens, int N, int V, int C) {
    fbt::embedding_backward(smat(dE, V, C), csmat(dout, N, C), tokens);
  }
  void bias_forward(T* out, const T* b, int R, int C) { fbt::bias_forward(smat(out, R, C), cvec(b, C)); }
  void bias_backward(T* db, const T* dout, int R, int C) { fbt::bias_backward(vec(db, C), csmat(dout, R, C)); }
  void jitter_add(T* out, const T* src, std::uint64_t seed, int row_offset, int B, std::size_t row_len, double sigma) {
    for (int r = 0; r < B; ++r) {
      SplitMix64 rr(jitter_row_seed(seed, long(row_offset) + r));
      for (std::size_t i = 0; i < row_len; ++i) out[r * row_len + i] = src[r * row_len + i] + T(rr.uniform(-sigma, sigma));
    }
  }

  // ---- loss, optimizer, reductions --------------------------------------------------------------
  double softmax_xent_forward(T* logits, T* losses, T* lse, const int* targets, int N, int V, double z) {
    return fbt::softmax_xent_forward(mat(logits, N, V), vec(losses, N), vec(lse, N), targets, z);
  }
  void softmax_xent_backward(T* probs, const T* lse, const int* targets, int N, int V, double scale, double z) {
    fbt::softmax_xent_backward(mat(probs, N, V), cvec(lse, N), targets, scale, z);
  }
  /// One vectorised pass over a tensor (Eigen fuses each statement into one loop, no temporaries).
  void adamw(T* p, const T* g, T* m, T* v, std::size_t n, const AdamWRates<T>& r, T wd);
  /// out (R) = sum over each row of x (R, C) of x^2: in double, in index order, rounded to T once.
  void row_sumsq(T* out, const T* x, int R, int C) {
    for (int r = 0; r < R; ++r) out[r] = T(sum_squares(x + std::size_t(r) * C, std::size_t(C)));
  }
  /// Row r of x (R, C) divided by sqrt(v[r]) + eps (one divisor per row, computed in T).
  void row_div_sqrt(T* x, const T* v, int R, int C, T eps);
  /// sum x^2 in double, in index order (deterministic).
  double sum_squares(const T* x, std::size_t n) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
    return s;
  }
  double masked_sumsq(const T* x, const T* mask, int R, int C) {
    double s = 0.0;
    for (int r = 0; r < R; ++r)
      if (mask[r] != T(0)) s += sum_squares(x + std::size_t(r) * C, std::size_t(C));
    return s;
  }
  double masked_diff_sumsq(const T* a, const T* b, const T* mask, int R, int C) {
    double s = 0.0;
    for (int r = 0; r < R; ++r)
      if (mask[r] != T(0))
        for (int c = 0; c < C; ++c) {
          const double d = double(a[std::size_t(r) * C + c]) - double(b[std::size_t(r) * C + c]);
          s += d * d;
        }
    return s;
  }
  std::pair<double, double> masked_sigmoid_moments(const T* z, const T* mask, int R, int C) {
    double s = 0.0, ss = 0.0;
    for (int r = 0; r < R; ++r)
      if (mask[r] != T(0))
        for (int c = 0; c < C; ++c) {
          const double g = 1.0 / (1.0 + std::exp(-double(z[std::size_t(r) * C + c])));
          s += g, ss += g * g;
        }
    return {s, ss};
  }

 private:
  static RowMapS<T> row(T* p, std::size_t n) { return smat(p, 1, Eigen::Index(n)); }
  static CRowMapS<T> crow(const T* p, std::size_t n) { return csmat(p, 1, Eigen::Index(n)); }
  static AlignedVector<T>& decode_scores() {
    // grows to the longest sequence seen, then never again; 64-byte aligned, as every fbt buffer, so the
    // kernel's reductions take the same (vectorised) path whatever the allocator returns
    thread_local AlignedVector<T> s;
    return s;
  }
};

// The members below hold Eigen expressions; they are defined outside the class (not inline) so that the
// explicit instantiation in src/kernels.cpp (fbt::kernels, FBT_COMPILED_KERNELS) replaces them in a
// program's own files. Header-only, they are instantiated where used, as any template.
template <class T> void CpuBackend<T>::gemm_fp32(RowMapS<T> C, CRowMapS<T> A, bool tA, CRowMapS<T> B, bool tB, bool acc) {
  if (C.rows() == 1 && !tA && tB) {  // W row-major (N, K): one dot product per output
    if (acc) C.row(0).transpose().noalias() += B * A.row(0).transpose();
    else C.row(0).transpose().noalias() = B * A.row(0).transpose();
    return;
  }
  fbt::gemm(C, A, tA, B, tB, acc);
}
template <class T> void CpuBackend<T>::axpby(T* y, T a, const T* x, T b, std::size_t n) {
  auto Y = vec(y, Eigen::Index(n));
  if (b == T(0)) Y = a * cvec(x, Eigen::Index(n));
  else Y = a * cvec(x, Eigen::Index(n)) + b * Y;
}
template <class T> void CpuBackend<T>::add(T* y, const T* x, std::size_t n) { vec(y, Eigen::Index(n)) += cvec(x, Eigen::Index(n)); }
template <class T> void CpuBackend<T>::move_plain_rows(T* dst, T* src, const T* mask, int R, int C) {
  for (int r = 0; r < R; ++r)
    if (mask[r] == T(0)) {
      vec(dst + std::size_t(r) * C, C) += cvec(src + std::size_t(r) * C, C);
      std::fill(src + std::size_t(r) * C, src + std::size_t(r + 1) * C, T(0));
    }
}
template <class T> void CpuBackend<T>::adamw(T* p, const T* g, T* m, T* v, std::size_t n, const AdamWRates<T>& r, T wd) {
  const auto N = Eigen::Index(n);
  auto P = vec(p, N).array();
  auto M = vec(m, N).array();
  auto Vv = vec(v, N).array();
  const auto G = cvec(g, N).array();
  M = r.b1 * M + r.ib1 * G;
  Vv = r.b2 * Vv + r.ib2 * G.square();
  P -= r.lr * ((M * r.rbc1) / ((Vv * r.rbc2).sqrt() + r.eps) + wd * P);
}
template <class T> void CpuBackend<T>::row_div_sqrt(T* x, const T* v, int R, int C, T eps) {
  for (int r = 0; r < R; ++r) vec(x + std::size_t(r) * C, C) /= std::sqrt(v[r]) + eps;
}

#ifdef FBT_COMPILED_KERNELS
extern template struct CpuBackend<float>;
extern template struct CpuBackend<double>;
#endif

}  // namespace fbt
