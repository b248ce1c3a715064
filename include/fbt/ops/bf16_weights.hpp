// fbt/ops/bf16_weights.hpp: bf16 copies of a model's weights, made once and reused by every bf16 product.
//
// A bf16 product (ops/gemm_bf16.hpp) rounds both operands to bf16. The right operand of a linear layer's
// product is its weight W (N, K): `x W^T` forward, `dy W` backward (input gradient). Converted on every
// call, a weight is rounded 2K times per K-pass step, and on every decoding step, where converting the
// whole matrix costs more than the one-row product itself. A weight scope says which floats are weights
// that stay constant for a while:
//
//   { fbt::Bf16WeightScope<float> s(values, n, /*fresh=*/true);   // a training step, a prefill
//     ... every bf16 product on this thread whose right operand lies in [values, values + n) reads a bf16
//     copy of it, made at its first use in the scope and kept for the next ones }
//
// fresh = true repacks at first use (the weights may have changed since the last scope: an optimizer
// step happened between two training steps); fresh = false (a decoding step of a prefilled sequence)
// reuses this thread's copies from the last scope over the same weights, so they are made once per
// prefill, not once per token. Writing the weights inside a scope, or between a fresh scope and a
// non-fresh one, leaves stale copies: the step and the decoder open their scopes where the weights are
// constant (a step; a sequence from its prefill on, as the KV cache already requires).
//
// The copies are per thread (each thread of a split step makes its own, no locks) and in the weight's
// storage order (rows of W), so forward (W^T) and backward (W) read the same copy; oneDNN's products
// also keep the copy in the blocked layout their kernel reads (one per orientation: forward and backward
// products of W want different blocks), made from it once. A scope over double,
// or with no bf16 precision in effect, does nothing. Products with few rows (decoding: one row per
// sequence) run gemm_bf16_rows below, a matrix-vector product over the bf16 copy that reads half the
// bytes of the float weight; the others hand the copy to oneDNN.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

#include "../core/precision.hpp"
#include "../core/tensor.hpp"

namespace fbt {
namespace detail {

/// Converts the (rows, cols) block at src (row stride ld) to contiguous bf16 at dst, rounding to nearest even.
inline void to_bf16(std::uint16_t* dst, const float* src, long rows, long cols, long ld) {
  for (long r = 0; r < rows; ++r) {
    const float* s = src + r * ld;
    std::uint16_t* d = dst + r * cols;
    for (long c = 0; c < cols; ++c) {  // vectorised by the compiler: integer adds and shifts
      std::uint32_t u;
      std::memcpy(&u, s + c, 4);
      const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
      d[c] = std::uint16_t((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : rounded);
    }
  }
}

/// One weight's bf16 copy: (rows, cols) of the float block at its key (row stride ld), contiguous; and the
/// same copy in the layouts a product library asked for (oneDNN's blocked formats), by a key it chooses.
struct Bf16Copy {
  long rows = 0, cols = 0, ld = 0;
  bool valid = false;  // made in the current scope (or a fresh one before it, for a non-fresh scope)
  AlignedVector<std::uint16_t> data;
  struct Layout {
    bool valid = false;  // made from the current data (the memory is kept when data is made anew: no allocation per step)
    AlignedVector<std::uint8_t> data;
  };
  std::unordered_map<std::string, Layout> layouts;
};

/// This thread's weight range and copies.
struct Bf16Weights {
  const float* lo = nullptr;  // the weights of the innermost open scope: [lo, hi); empty when none is open
  const float* hi = nullptr;
  std::unordered_map<const float*, Bf16Copy> copies;  // by the first float of the block
};
inline Bf16Weights& bf16_weights() {
  thread_local Bf16Weights w;
  return w;
}

}  // namespace detail

/// \brief The bf16 copy of the (rows, cols) block B (row stride ld) when it lies in this thread's open weight
/// scope (made now if it has none yet), else null: then the caller converts it itself.
inline detail::Bf16Copy* bf16_weight_entry(const float* B, long rows, long cols, long ld) {
  auto& w = detail::bf16_weights();
  if (B < w.lo || B >= w.hi || B + (rows - 1) * ld + cols > w.hi) return nullptr;
  detail::Bf16Copy& c = w.copies[B];
  if (!c.valid || c.rows != rows || c.cols != cols || c.ld != ld) {
    c.data.resize(std::size_t(rows * cols));
    detail::to_bf16(c.data.data(), B, rows, cols, ld);
    c.rows = rows, c.cols = cols, c.ld = ld, c.valid = true;
    for (auto& l : c.layouts) l.second.valid = false;
  }
  return &c;
}
/// \brief The contiguous bf16 copy's first element (see bf16_weight_entry), or null.
inline const std::uint16_t* bf16_weight_copy(const float* B, long rows, long cols, long ld) {
  detail::Bf16Copy* c = bf16_weight_entry(B, rows, cols, ld);
  return c ? c->data.data() : nullptr;
}

/// \brief Makes [values, values + n) this thread's weights while it lives (see the file comment); restores
/// the enclosing scope's on exit. Over a scalar other than float it does nothing.
template <class T> class Bf16WeightScope {
 public:
  Bf16WeightScope(const T*, std::size_t, bool) {}
};
template <> class Bf16WeightScope<float> {
 public:
  Bf16WeightScope(const float* values, std::size_t n, bool fresh) {
    auto& w = detail::bf16_weights();
    prev_lo_ = w.lo, prev_hi_ = w.hi;
    if (matmul_precision() != Precision::bf16 || !values || n == 0) return;  // nothing to pack: products stay as they are
    active_ = true;
    const float *lo = values, *hi = values + n;
    for (auto it = w.copies.begin(); it != w.copies.end();) {
      const bool inside = it->first >= lo && it->first < hi;
      const bool enclosing = it->first >= prev_lo_ && it->first < prev_hi_;
      if (!inside && !enclosing) it = w.copies.erase(it);  // another model's (or a freed one's): dropped
      else {
        if (inside && fresh) it->second.valid = false;
        ++it;
      }
    }
    w.lo = lo, w.hi = hi;
  }
  ~Bf16WeightScope() {
    auto& w = detail::bf16_weights();
    if (active_) w.lo = prev_lo_, w.hi = prev_hi_;
  }
  Bf16WeightScope(const Bf16WeightScope&) = delete;
  Bf16WeightScope& operator=(const Bf16WeightScope&) = delete;

 private:
  const float *prev_lo_ = nullptr, *prev_hi_ = nullptr;
  bool active_ = false;
};

// ---- activations converted once per layer ------------------------------------------------------------------------
// A layer's input x feeds several products: the q, k and v projections (and gate and up in SwiGLU) forward, and
// their weight gradients dW += dy^T x backward; a linear layer's output gradient dy feeds both dx += dy W and
// dW += dy^T x. An input scope says that a block of floats stays constant while it is open:
//
//   { fbt::Bf16InputScope<float> in(x, n);   // x: [x, x + n) is not written until the scope closes
//     ... every bf16 product on this thread whose left or (non-weight) right operand lies in it reads one bf16
//     copy of it, made at its first use in the scope }
//
// so x is rounded once per layer instead of once per product. The copy is in the block's storage order,
// so a product that reads it transposed (dy^T in dW += dy^T x) shares it. Scopes nest (a layer's scope over
// x, and inside it linear_backward's over dy); each level keeps its buffer across scopes, so after the first
// step nothing is allocated. Writing the block inside its scope leaves a stale copy: the layers open scopes
// only around products that read, never write, the block. Over double, or with no bf16 precision in effect,
// a scope does nothing.
namespace detail {
struct Bf16Input {
  const float *lo = nullptr, *hi = nullptr;  // the block of the scope at this depth
  const float* ptr = nullptr;                // the operand converted (its first float), its shape and row stride
  long rows = 0, cols = 0, ld = 0;
  AlignedVector<std::uint16_t> data;         // (rows, cols) bf16, contiguous
};
struct Bf16Inputs {
  int depth = 0;                   // open scopes
  std::vector<Bf16Input> levels;   // one per depth reached so far (buffers kept)
  long reused = 0;                 // products served by a copy made before them (tests)
};
inline Bf16Inputs& bf16_inputs() {
  thread_local Bf16Inputs in;
  return in;
}
/// Tests set this to open no input scope (every product rounds its own operands): a step must give the same
/// numbers either way, which it does only if no layer writes a block inside its scope.
inline std::atomic<bool>& bf16_inputs_disabled() {
  static std::atomic<bool> off{false};
  return off;
}
}  // namespace detail

/// \brief The bf16 copy of the (rows, cols) operand A (row stride ld) when it lies in an open input scope of
/// this thread (made now unless the scope already has it), else null: then the caller converts it itself.
inline const std::uint16_t* bf16_input_copy(const float* A, long rows, long cols, long ld) {
  auto& in = detail::bf16_inputs();
  for (int d = in.depth - 1; d >= 0; --d) {
    detail::Bf16Input& l = in.levels[std::size_t(d)];
    if (A < l.lo || A >= l.hi || A + (rows - 1) * ld + cols > l.hi) continue;
    if (l.ptr != A || l.rows != rows || l.cols != cols || l.ld != ld) {
      if (l.data.size() < std::size_t(rows * cols)) l.data.resize(std::size_t(rows * cols));
      detail::to_bf16(l.data.data(), A, rows, cols, ld);
      l.ptr = A, l.rows = rows, l.cols = cols, l.ld = ld;
    } else
      ++in.reused;
    return l.data.data();
  }
  return nullptr;
}

/// \brief Makes [x, x + n) a constant operand of this thread's bf16 products while it lives (see above).
template <class T> class Bf16InputScope {
 public:
  Bf16InputScope(const T*, std::size_t) {}
};
template <> class Bf16InputScope<float> {
 public:
  Bf16InputScope(const float* x, std::size_t n) {
    if (matmul_precision() != Precision::bf16 || !x || n == 0 || detail::bf16_inputs_disabled().load(std::memory_order_relaxed)) return;
    auto& in = detail::bf16_inputs();
    if (std::size_t(in.depth) == in.levels.size()) in.levels.emplace_back();
    detail::Bf16Input& l = in.levels[std::size_t(in.depth++)];
    l.lo = x, l.hi = x + n, l.ptr = nullptr;  // nothing converted yet in this scope
    active_ = true;
  }
  ~Bf16InputScope() {
    if (!active_) return;
    auto& in = detail::bf16_inputs();
    in.levels[std::size_t(--in.depth)].ptr = nullptr;
  }
  Bf16InputScope(const Bf16InputScope&) = delete;
  Bf16InputScope& operator=(const Bf16InputScope&) = delete;

 private:
  bool active_ = false;
};

namespace detail {
/// R rows of W (bf16, row stride K) times the rounded rows x (M, K): y (M, ldy) columns n0..n0+R-1.
template <int R>
inline void bf16_rows_block(float* y, long ldy, const float* x, long M, const std::uint16_t* W, long n0, long K, bool accumulate) {
  constexpr int S = 16;  // lanes of the partial sums: one 512-bit (or two 256-bit) registers per row
  for (long m = 0; m < M; ++m) {
    const float* xm = x + m * K;
    float acc[R][S] = {};
    long k = 0;
    for (; k + S <= K; k += S)
      for (int r = 0; r < R; ++r) {
        const std::uint16_t* w = W + (n0 + r) * K + k;
        for (int j = 0; j < S; ++j) {
          const std::uint32_t u = std::uint32_t(w[j]) << 16;  // bf16 -> float: the same bits, widened
          float f;
          std::memcpy(&f, &u, 4);
          acc[r][j] += f * xm[k + j];
        }
      }
    for (int h = S / 2; h > 0; h /= 2)  // the lanes summed pairwise (in registers, not one by one)
      for (int r = 0; r < R; ++r)
        for (int j = 0; j < h; ++j) acc[r][j] += acc[r][j + h];
    for (int r = 0; r < R; ++r) {
      float s = acc[r][0];
      for (long kk = k; kk < K; ++kk) s += bf16_to_float(W[(n0 + r) * K + kk]) * xm[kk];
      float& out = y[m * ldy + n0 + r];
      out = accumulate ? out + s : s;
    }
  }
}
}  // namespace detail

namespace detail {
/// gemm_bf16_rows in plain C++ (any CPU): the rows of W widened to float, 16-lane partial sums.
inline void gemm_bf16_rows_portable(RowMapS<float> C, CRowMapS<float> A, const std::uint16_t* W, bool accumulate) {
  const long M = A.rows(), K = A.cols(), N = C.cols();
  thread_local AlignedVector<float> x;  // (M, K) A rounded to bf16
  if (x.size() < std::size_t(M * K)) x.resize(std::size_t(M * K));
  for (long m = 0; m < M; ++m)
    for (long k = 0; k < K; ++k) x[std::size_t(m * K + k)] = round_bf16(A(m, k));
  long n = 0;
  for (; n + 4 <= N; n += 4) bf16_rows_block<4>(C.data(), C.outerStride(), x.data(), M, W, n, K, accumulate);
  for (; n < N; ++n) bf16_rows_block<1>(C.data(), C.outerStride(), x.data(), M, W, n, K, accumulate);
}

#if defined(__AVX512BF16__)
/// gemm_bf16_rows with AVX512-BF16 (Cooper Lake, Sapphire Rapids, Zen 4/5): vdpbf16ps multiplies 32 bf16 pairs
/// and adds them into 16 float sums per instruction, with no widening. Like every bf16 dot-product unit it
/// treats bf16 subnormals (below 1.2e-38) as zero.
inline void gemm_bf16_rows_avx512bf16(RowMapS<float> C, CRowMapS<float> A, const std::uint16_t* W, bool accumulate) {
  const long M = A.rows(), K = A.cols(), N = C.cols();
  thread_local AlignedVector<std::uint16_t> xb;  // (M, K) A in bf16
  if (xb.size() < std::size_t(M * K)) xb.resize(std::size_t(M * K));
  to_bf16(xb.data(), A.data(), M, K, A.outerStride());
  const long K32 = K / 32 * 32;
  const __mmask32 tail = __mmask32((1ull << (K - K32)) - 1);  // the last K % 32 columns; zeros elsewhere add nothing
  auto dot = [&](__m512& acc, const std::uint16_t* w, const std::uint16_t* x) {
    for (long k = 0; k < K32; k += 32)
      acc = _mm512_dpbf16_ps(acc, __m512bh(_mm512_loadu_si512(w + k)), __m512bh(_mm512_loadu_si512(x + k)));
    if (K32 < K)
      acc = _mm512_dpbf16_ps(acc, __m512bh(_mm512_maskz_loadu_epi16(tail, w + K32)), __m512bh(_mm512_maskz_loadu_epi16(tail, x + K32)));
  };
  for (long m = 0; m < M; ++m) {
    const std::uint16_t* x = xb.data() + m * K;
    float* y = C.data() + m * C.outerStride();
    long n = 0;
    for (; n + 4 <= N; n += 4) {  // four rows of W against one x: x's loads shared
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (long k = 0; k < K32; k += 32) {
        const __m512bh xv = __m512bh(_mm512_loadu_si512(x + k));
        a0 = _mm512_dpbf16_ps(a0, __m512bh(_mm512_loadu_si512(W + n * K + k)), xv);
        a1 = _mm512_dpbf16_ps(a1, __m512bh(_mm512_loadu_si512(W + (n + 1) * K + k)), xv);
        a2 = _mm512_dpbf16_ps(a2, __m512bh(_mm512_loadu_si512(W + (n + 2) * K + k)), xv);
        a3 = _mm512_dpbf16_ps(a3, __m512bh(_mm512_loadu_si512(W + (n + 3) * K + k)), xv);
      }
      if (K32 < K) {
        const __m512bh xv = __m512bh(_mm512_maskz_loadu_epi16(tail, x + K32));
        a0 = _mm512_dpbf16_ps(a0, __m512bh(_mm512_maskz_loadu_epi16(tail, W + n * K + K32)), xv);
        a1 = _mm512_dpbf16_ps(a1, __m512bh(_mm512_maskz_loadu_epi16(tail, W + (n + 1) * K + K32)), xv);
        a2 = _mm512_dpbf16_ps(a2, __m512bh(_mm512_maskz_loadu_epi16(tail, W + (n + 2) * K + K32)), xv);
        a3 = _mm512_dpbf16_ps(a3, __m512bh(_mm512_maskz_loadu_epi16(tail, W + (n + 3) * K + K32)), xv);
      }
      const float s[4] = {_mm512_reduce_add_ps(a0), _mm512_reduce_add_ps(a1), _mm512_reduce_add_ps(a2), _mm512_reduce_add_ps(a3)};
      for (int r = 0; r < 4; ++r) y[n + r] = accumulate ? y[n + r] + s[r] : s[r];
    }
    for (; n < N; ++n) {
      __m512 a = _mm512_setzero_ps();
      dot(a, W + n * K, x);
      const float s = _mm512_reduce_add_ps(a);
      y[n] = accumulate ? y[n] + s : s;
    }
  }
}
#endif
}  // namespace detail

/// \brief C (M, N) (+)= round_bf16(A) (M, K) W^T with W the bf16 copy (N, K) of a weight: products exact in
/// float, sums in float (the definition gemm_bf16_reference, up to the order of the sums). For few rows
/// (decoding), where the product reads each weight once: half the bytes of the float product. With
/// AVX512-BF16 in the build (-march=native on such a CPU) its dot-product instruction, else plain C++.
inline void gemm_bf16_rows(RowMapS<float> C, CRowMapS<float> A, const std::uint16_t* W, bool accumulate) {
#if defined(__AVX512BF16__)
  detail::gemm_bf16_rows_avx512bf16(C, A, W, accumulate);
#else
  detail::gemm_bf16_rows_portable(C, A, W, accumulate);
#endif
}

}  // namespace fbt
