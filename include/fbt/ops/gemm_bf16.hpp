// fbt/ops/gemm_bf16.hpp: bf16 mixed-precision matrix products (float tensors, bf16 operands, fp32 sums).
//
// Mixed precision in fbt changes one thing: the operands of the model's linear products (projections,
// MLP, fuser, LM head, forward and backward) are rounded to bfloat16 (round to nearest even) and
// multiplied with float accumulation, C = op(A)_bf16 op(B)_bf16 in fp32. Everything else stays float:
// the master weights, the optimizer state, the gradients, the activations between products, the norms,
// softmax, attention and the loss. This is what PyTorch calls `torch.set_float32_matmul_precision
// ("medium")` and close to `torch.autocast("cpu", torch.bfloat16)` (which also keeps activations in
// bf16 between products, and runs attention in bf16).
//
//   fbt::set_matmul_precision(fbt::Precision::bf16);     // process-wide; every thread of a step sees it
//   { fbt::ScopedMatmulPrecision p(fbt::Precision::bf16); ... }   // for one scope (restored after)
//
// The products run through oneDNN (Intel's deep-learning primitives, Debian's libdnnl-dev): its matmul
// dispatches at run time to AMX (Sapphire Rapids and later), AVX512-BF16 (Cooper Lake, Zen 4/5) or an
// AVX-512 kernel that converts to float. oneDNN 2.6 (Debian 12's) has no bf16 matmul for a CPU without
// AVX-512 (an AVX2-only Zen 2 or Zen 3, say): there fbt rounds the operands itself and runs Eigen's float
// product (gemm_bf16_fallback: the definition below, with per-thread buffers), so bf16 runs give the same
// numbers on every CPU, up to the order of the float sums, and gemm_bf16_impl() names which path runs.
// fbt is compiled with oneDNN when CMake finds it
// (FBT_HAVE_DNNL); without it the float path is unchanged and asking for bf16 is refused with a message
// (bf16_available()). `gemm_bf16_reference` (rounded operands, Eigen's float product) is the
// definition the oneDNN path is tested against: a product of two bf16 numbers is exact in float, so the
// two differ only by the order of the float sums. A right operand that is a weight of an open weight
// scope (ops/bf16_weights.hpp: a training step, a decoded sequence) is not converted again: its bf16 copy
// is read, in the blocked layout oneDNN's kernel chose, and products of a few rows (decoding) run
// gemm_bf16_rows over it. An operand lying in an open input scope (the same header: a layer's input, a
// linear layer's output gradient) is rounded once for all the products of the scope that read it.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "../core/precision.hpp"
#include "bf16_weights.hpp"
#include "gemm.hpp"
#include "gemm_dnnl.hpp"  // the oneDNN engine, streams and primitives

namespace fbt {

/// \brief The definition of a bf16 product: C (M, N) (+)= op(A) op(B) with both operands rounded to bf16
/// first, summed in float (Eigen's product). Slow (copies both operands); tests and references only.
inline void gemm_bf16_reference(RowMapS<float> C, CRowMapS<float> A, bool transA, CRowMapS<float> B, bool transB, bool accumulate) {
  RowMat<float> a = A.unaryExpr([](float x) { return round_bf16(x); });  // (rows of A, cols of A)
  RowMat<float> b = B.unaryExpr([](float x) { return round_bf16(x); });
  gemm(C, csmat(a.data(), a.rows(), a.cols()), transA, csmat(b.data(), b.rows(), b.cols()), transB, accumulate);
}

namespace detail {
/// Tests set this to run the fallback on a CPU where oneDNN has its own bf16 kernel.
inline std::atomic<bool>& bf16_force_fallback() {
  static std::atomic<bool> f{false};
  return f;
}
/// Rounds the (rows, cols) block at src (row stride ld) to bf16 values kept as floats, contiguous at dst.
inline void round_block_bf16(float* dst, const float* src, long rows, long cols, long ld) {
  for (long r = 0; r < rows; ++r)
    for (long c = 0; c < cols; ++c) dst[r * cols + c] = round_bf16(src[r * ld + c]);
}
}  // namespace detail

/// \brief C (M, N) (+)= op(A) op(B), operands rounded to bf16, sums in float: Eigen's float product on
/// rounded copies (per-thread buffers, reused). The path on CPUs where oneDNN has no bf16 matmul; equal to
/// gemm_bf16_reference bit for bit.
inline void gemm_bf16_fallback(RowMapS<float> C, CRowMapS<float> A, bool transA, CRowMapS<float> B, bool transB, bool accumulate) {
  thread_local AlignedVector<float> a, b;  // rounded copies of A (A.rows(), A.cols()) and B (B.rows(), B.cols())
  if (a.size() < std::size_t(A.size())) a.resize(std::size_t(A.size()));
  if (b.size() < std::size_t(B.size())) b.resize(std::size_t(B.size()));
  detail::round_block_bf16(a.data(), A.data(), A.rows(), A.cols(), A.outerStride());
  detail::round_block_bf16(b.data(), B.data(), B.rows(), B.cols(), B.outerStride());
  gemm(C, csmat(a.data(), A.rows(), A.cols()), transA, csmat(b.data(), B.rows(), B.cols()), transB, accumulate);
}

/// Runs gemm_bf16_fallback for a scope even where oneDNN has a bf16 kernel (tests of the fallback).
class ScopedBf16Fallback : detail::ScopedSwitch<bool> {
 public:
  ScopedBf16Fallback() : ScopedSwitch(detail::bf16_force_fallback(), true) {}
};

#if defined(FBT_HAVE_DNNL)
namespace detail {

/// The oneDNN kernel of a bf16 product of this shape; throws dnnl::error where there is none.
inline std::string dnnl_bf16_impl(long M, long N, long K) {
  using dnnl::memory;
  auto& eng = dnnl_context().eng;
  const memory::desc a_md({M, K}, memory::data_type::bf16, memory::dims{K, 1});
  const memory::desc b_md({K, N}, memory::data_type::bf16, memory::dims{1, K});
  const memory::desc c_md({M, N}, memory::data_type::f32, memory::dims{N, 1});
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
  return pd.impl_info_str();
}
/// Whether oneDNN has a bf16 matmul on this CPU (2.6 needs AVX-512); asked once per process.
inline bool dnnl_has_bf16_matmul() {
  static const bool ok = [] {
    try {
      dnnl_bf16_impl(16, 16, 16);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

}  // namespace detail

/// Products with at most this many rows and a weight copy run gemm_bf16_rows (decoding: one row per sequence).
constexpr long kBf16RowsMax = 8;

/// \brief C (M, N) = op(A) op(B) (+ C when accumulate), operands rounded to bf16, sums in float (oneDNN;
/// gemm_bf16_fallback on a CPU it has no bf16 kernel for).
inline void gemm_bf16(RowMapS<float> C, CRowMapS<float> A, bool transA, CRowMapS<float> B, bool transB, bool accumulate) {
  using dnnl::memory;
  const long M = transA ? A.cols() : A.rows(), K = transA ? A.rows() : A.cols();
  const long N = transB ? B.rows() : B.cols(), KB = transB ? B.cols() : B.rows();
  FBT_ASSERT(K == KB && C.rows() == M && C.cols() == N, "gemm_bf16: shape mismatch");
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) C.setZero();
    return;
  }
  // A weight of the open weight scope (ops/bf16_weights.hpp) is read from its bf16 copy; with few rows,
  // by the matrix-vector kernel there (decoding), on every CPU.
  detail::Bf16Copy* wc = bf16_weight_entry(B.data(), B.rows(), B.cols(), B.outerStride());
  const std::uint16_t* bw = wc ? wc->data.data() : nullptr;
  if (bw && transB && !transA && M <= kBf16RowsMax) return gemm_bf16_rows(C, A, bw, accumulate);
  if (detail::bf16_force_fallback().load(std::memory_order_relaxed) || !detail::dnnl_has_bf16_matmul())
    return gemm_bf16_fallback(C, A, transA, B, transB, accumulate);
  auto& th = detail::dnnl_thread();
  // Both operands are copied to contiguous bf16 in their own storage order; oneDNN's matmul takes a
  // transposed operand as strides ((M, K) with strides (1, M)), at full speed. An operand of an open input
  // scope (bf16_weights.hpp: a layer's input, a linear layer's output gradient) is converted once per scope.
  const std::uint16_t* ab = bf16_input_copy(A.data(), A.rows(), A.cols(), A.outerStride());
  if (!ab) {
    if (th.a.size() < std::size_t(M * K)) th.a.resize(std::size_t(M * K));
    detail::to_bf16(th.a.data(), A.data(), A.rows(), A.cols(), A.outerStride());  // (M, K), or (K, M) when transA
    ab = th.a.data();
  }
  if (!bw) bw = bf16_input_copy(B.data(), B.rows(), B.cols(), B.outerStride());
  if (!bw) {
    if (th.b.size() < std::size_t(K * N)) th.b.resize(std::size_t(K * N));
    detail::to_bf16(th.b.data(), B.data(), B.rows(), B.cols(), B.outerStride());  // (K, N), or (N, K) when transB
    bw = th.b.data();
  }
  const long ldc = C.outerStride();
  const detail::DnnlThread::Key key{true, M, N, K, transA ? M : K, transB ? K : N, ldc, transA, transB, accumulate, wc != nullptr};
  auto it = th.prims.find(key);
  auto& eng = detail::dnnl_context().eng;
  using dt = memory::data_type;
  const memory::desc b_md = detail::dnnl_plain(K, N, transB ? K : N, transB, dt::bf16);
  if (it == th.prims.end()) {
    // A weight copy is handed over in the layout the kernel asks for (format_tag::any: for AVX512-BF16 and
    // AMX a blocked, pair-interleaved one), so that its kernel does not repack B on every call.
    const memory::desc w_any({K, N}, dt::bf16, memory::format_tag::any);
    detail::DnnlPrim p = detail::dnnl_make_prim(detail::dnnl_plain(M, K, transA ? M : K, transA, dt::bf16), wc ? w_any : b_md,
                                                detail::dnnl_plain(M, N, ldc, false, dt::f32), accumulate);
    if (wc && p.weights != b_md) {
      // the key names the layout and which way the copy is read: a square weight's forward (W^T) and
      // backward (W) products ask for the same blocked descriptor of different contents
      p.layout.assign(transB ? "T" : "N");
      p.layout.append(reinterpret_cast<const char*>(&p.weights.data), sizeof(p.weights.data));
      p.to_layout = dnnl::reorder(dnnl::reorder::primitive_desc(eng, b_md, eng, p.weights));
    }
    it = th.prims.emplace(key, std::move(p)).first;
  }
  auto& p = it->second;
  const void* bdata = bw;
  if (!p.layout.empty()) {  // the copy in the kernel's layout, made from the plain copy once
    auto& lay = wc->layouts[p.layout];
    if (!lay.valid) {
      lay.data.resize(p.weights.get_size());
      memory src(b_md, eng, const_cast<std::uint16_t*>(bw)), dst(p.weights, eng, lay.data.data());
      p.to_layout.execute(th.stream, src, dst);
      lay.valid = true;
    }
    bdata = lay.data.data();
  }
  detail::dnnl_run(th, p, ab, bdata, C.data());
}

/// The name of the oneDNN kernel a bf16 product of this shape runs (e.g. "brg:avx512_core_bf16"), for the
/// benchmarks' reports: which of AMX, AVX512-BF16 or a fallback this CPU got.
inline std::string gemm_bf16_impl(long M, long N, long K) {
  if (detail::bf16_force_fallback().load(std::memory_order_relaxed)) return "fbt fallback (forced): rounded operands, Eigen float product";
  if (!detail::dnnl_has_bf16_matmul())
    return "fbt fallback: rounded operands, Eigen float product (oneDNN has no bf16 matmul for this CPU: it needs AVX-512)";
  return "oneDNN " + detail::dnnl_bf16_impl(M, N, K);
}
#else
inline void gemm_bf16(RowMapS<float>, CRowMapS<float>, bool, CRowMapS<float>, bool, bool) {
  throw Error("gemm_bf16: " + bf16_unavailable_reason());
}
inline std::string gemm_bf16_impl(long, long, long) { return "unavailable (built without oneDNN)"; }
#endif

}  // namespace fbt
