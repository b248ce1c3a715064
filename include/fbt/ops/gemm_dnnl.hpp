// fbt/ops/gemm_dnnl.hpp: oneDNN's matmul behind fbt's products, float and bf16.
//
// Two products run through oneDNN (Intel's deep-learning primitives, Debian's libdnnl-dev) when fbt is
// built with it (FBT_HAVE_DNNL, the fbt::bf16 target):
//   - every bf16 product (ops/gemm_bf16.hpp), on CPUs where oneDNN has a bf16 kernel;
//   - the float products of the CPU backend (backend/cpu.hpp), where oneDNN's float kernel for the
//     product's shape is its AVX-512 "brgemm" one (brg:avx512_core: AVX-512 CPUs, Intel and AMD Zen 4/5). On Zen 4 it is 1.02-1.08x
//     Eigen's blocked product at most of the steps' shapes (level at the rest), 1.5x at thin ones (a
//     dimension of 16 or 32), and the steps 2-4.5% faster (docs/PERFORMANCE.md, "The float products
//     through oneDNN"). Elsewhere (an AVX2 CPU, where oneDNN 2.6 offers its older jit GEMM: on Zen 3
//     Eigen's took 0.67-1.38x its time per shape and its steps 0.94-1.10x, docs/PERFORMANCE.md "AMD EPYC
//     Zen 3") and in double, Eigen's product runs, as it does in a build without oneDNN.
//     gemm_f32_impl() names the product that runs.
// Both orders of the sums are float sums of the same products: the two float products differ by float
// rounding only, and the tests compare every step with tolerances, never bit for bit across the two.
//
// This header holds what both share: the engine, and per thread a stream and the primitives made so far
// (one per product shape: a model has a few dozen; making one costs ~0.1 ms, so it is done once), each
// with its memory objects and argument list, so that running a product makes no object of fbt's. oneDNN's
// own execute() makes a few small bookkeeping allocations per call (its execution context, ~6) and frees
// them before it returns; tests/model/test_no_alloc.cpp checks that a step retains nothing.
//
// ScopedFp32Eigen runs Eigen's float product for a scope (tests, and the before/after benchmark);
// ScopedFp32OneDnn runs oneDNN's whatever its kernel (measuring it on a CPU where Eigen's is the default).
#pragma once

#include <atomic>
#include <string>

#include "../core/precision.hpp"
#include "gemm.hpp"

#if defined(FBT_HAVE_DNNL)
#include <dlfcn.h>

#include <map>
#include <tuple>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace fbt {
/// Which kernel the float products run: oneDNN's where it is its brgemm one, else Eigen's (automatic);
/// always Eigen's; oneDNN's whatever its kernel (in a build with oneDNN; Eigen's in one without).
enum class Fp32Gemm { automatic, eigen, onednn };

namespace detail {
/// Set by ScopedFp32Eigen / ScopedFp32OneDnn (an Fp32Gemm).
inline std::atomic<int>& fp32_gemm_choice() {
  static std::atomic<int> f{int(Fp32Gemm::automatic)};
  return f;
}
inline Fp32Gemm fp32_gemm_now() { return Fp32Gemm(fp32_gemm_choice().load(std::memory_order_relaxed)); }
}  // namespace detail

/// Runs Eigen's float product for a scope even where oneDNN's would run (tests; the before/after benchmark).
class ScopedFp32Eigen : detail::ScopedSwitch<int> {
 public:
  ScopedFp32Eigen() : ScopedSwitch(detail::fp32_gemm_choice(), int(Fp32Gemm::eigen)) {}
};
/// Runs oneDNN's float product for a scope whatever kernel it picks (its older jit GEMM on an AVX2 CPU, say),
/// to measure it against Eigen's where Eigen's is the default (bench_e2e --fp32-gemm onednn). Without oneDNN
/// in the build, Eigen's still runs.
class ScopedFp32OneDnn : detail::ScopedSwitch<int> {
 public:
  ScopedFp32OneDnn() : ScopedSwitch(detail::fp32_gemm_choice(), int(Fp32Gemm::onednn)) {}
};

#if defined(FBT_HAVE_DNNL)
namespace detail {

struct DnnlContext {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
};
inline DnnlContext& dnnl_context() {
  static DnnlContext c;
  return c;
}

/// One product's primitive: the matmul, the layout of B it reads, and its memory objects and arguments,
/// made once; a call only points the memory objects at its operands (set_data_handle).
struct DnnlPrim {
  dnnl::matmul matmul;
  dnnl::memory::desc weights;  // the layout of B it reads: the plain one, or (B a bf16 weight copy) the one its kernel chose
  std::string layout;          // the key of that layout among a weight copy's layouts (transB, then the descriptor's bytes); empty: plain
  dnnl::reorder to_layout;     // plain bf16 -> that layout
  dnnl::memory a, b, c;        // A, B (in `weights`), C; their data handles are set per call
  std::unordered_map<int, dnnl::memory> args;
  std::string impl;            // the kernel oneDNN chose (e.g. "brg:avx512_core")
  bool runs = true;            // false: a float product whose kernel is not the brgemm one (Eigen's runs instead, unless forced)
};

/// This thread's stream, bf16 operand buffers (ops/gemm_bf16.hpp) and primitives.
struct DnnlThread {
  dnnl::stream stream{dnnl_context().eng};
  AlignedVector<std::uint16_t> a, b;  // bf16 copies of A and B, contiguous, in their storage order
  // bf16 operands, M, N, K, lda, ldb, ldc, transA, transB, accumulate, B a bf16 weight copy
  using Key = std::tuple<bool, long, long, long, long, long, long, bool, bool, bool, bool>;
  std::map<Key, DnnlPrim> prims;
  DnnlThread() {
    // fbt splits a step across its own threads; each product runs on the calling thread only. Debian's
    // oneDNN uses OpenMP, whose team size is per calling thread: set it to 1 here (found at run time, so
    // fbt does not link an OpenMP runtime itself).
    using SetThreads = void (*)(int);
    if (auto f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) f(1);
  }
};
inline DnnlThread& dnnl_thread() {
  thread_local DnnlThread t;
  return t;
}

/// A primitive for C (M, N) (+)= A (M, K) B (K, N) with these descriptors, its memory objects and arguments.
inline DnnlPrim dnnl_make_prim(const dnnl::memory::desc& a_md, const dnnl::memory::desc& b_md, const dnnl::memory::desc& c_md,
                               bool accumulate) {
  auto& eng = dnnl_context().eng;
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.f);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, eng);
  DnnlPrim p;
  p.matmul = dnnl::matmul(pd);
  p.weights = pd.weights_desc();
  p.a = dnnl::memory(a_md, eng, DNNL_MEMORY_NONE);
  p.b = dnnl::memory(p.weights, eng, DNNL_MEMORY_NONE);
  p.c = dnnl::memory(c_md, eng, DNNL_MEMORY_NONE);
  p.args = {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}};
  p.impl = pd.impl_info_str();
  return p;
}

/// Runs a primitive on these operands, on the calling thread.
inline void dnnl_run(DnnlThread& th, DnnlPrim& p, const void* a, const void* b, float* c) {
  p.a.set_data_handle(const_cast<void*>(a));
  p.b.set_data_handle(const_cast<void*>(b));
  p.c.set_data_handle(c);
  p.matmul.execute(th.stream, p.args);
  th.stream.wait();
}

/// The plain descriptor of op(X) (rows, cols) stored row-major with row stride ld: transposed, its strides swap.
inline dnnl::memory::desc dnnl_plain(long rows, long cols, long ld, bool trans, dnnl::memory::data_type dt) {
  return dnnl::memory::desc({rows, cols}, dt, trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
}

/// The oneDNN kernel of a float product of this shape (e.g. "brg:avx512_core").
inline std::string dnnl_f32_impl(long M, long N, long K) {
  using dt = dnnl::memory::data_type;
  dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(dnnl_plain(M, K, K, false, dt::f32), dnnl_plain(K, N, K, true, dt::f32), dnnl_plain(M, N, N, false, dt::f32)),
      dnnl_context().eng);
  return pd.impl_info_str();
}
/// The float kernel fbt runs oneDNN's product with: its AVX-512 brgemm one (the one measured against Eigen's).
inline bool dnnl_f32_kernel_ok(const std::string& impl) { return impl.rfind("brg:avx512", 0) == 0; }
/// Whether the float products may run oneDNN's kernel on this CPU: it has that kernel (asked once per
/// process, on the steps' typical shape; each product's own primitive is asked again when it is made).
inline bool dnnl_f32_preferred() {
  static const bool ok = [] {
    try {
      return dnnl_f32_kernel_ok(dnnl_f32_impl(256, 128, 128));
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

}  // namespace detail

/// \brief C (M, N) = op(A) op(B) (+ C when accumulate) in float through oneDNN, where its kernel is the
/// faster one (above) or a ScopedFp32OneDnn asks for oneDNN's whatever its kernel; returns false, having
/// done nothing, where Eigen's should run (ScopedFp32Eigen, or oneDNN's kernel is not the faster one).
inline bool gemm_f32_dnnl(RowMapS<float> C, CRowMapS<float> A, bool transA, CRowMapS<float> B, bool transB, bool accumulate) {
  const Fp32Gemm choice = detail::fp32_gemm_now();
  if (choice == Fp32Gemm::eigen || (choice == Fp32Gemm::automatic && !detail::dnnl_f32_preferred())) return false;
  const long M = transA ? A.cols() : A.rows(), K = transA ? A.rows() : A.cols();
  const long N = transB ? B.rows() : B.cols(), KB = transB ? B.cols() : B.rows();
  FBT_ASSERT(K == KB && C.rows() == M && C.cols() == N, "gemm_f32_dnnl: shape mismatch");
  if (M == 0 || N == 0 || K == 0) return false;  // Eigen's path handles the empty products
  auto& th = detail::dnnl_thread();
  const long lda = A.outerStride(), ldb = B.outerStride(), ldc = C.outerStride();
  const detail::DnnlThread::Key key{false, M, N, K, lda, ldb, ldc, transA, transB, accumulate, false};
  auto it = th.prims.find(key);
  if (it == th.prims.end()) {
    using dt = dnnl::memory::data_type;
    it = th.prims
             .emplace(key, detail::dnnl_make_prim(detail::dnnl_plain(M, K, lda, transA, dt::f32), detail::dnnl_plain(K, N, ldb, transB, dt::f32),
                                                  detail::dnnl_plain(M, N, ldc, false, dt::f32), accumulate))
             .first;
    // a shape for which oneDNN chose another kernel than its brgemm one runs Eigen's (its primitive is
    // kept only to remember that)
    it->second.runs = detail::dnnl_f32_kernel_ok(it->second.impl);
  }
  if (!it->second.runs && choice != Fp32Gemm::onednn) return false;
  detail::dnnl_run(th, it->second, A.data(), B.data(), C.data());
  return true;
}

/// The float product the CPU backend runs for a product of this shape: oneDNN's kernel or Eigen's.
inline std::string gemm_f32_impl(long M, long N, long K) {
  if (detail::fp32_gemm_now() == Fp32Gemm::eigen) return "Eigen (forced)";
  if (detail::fp32_gemm_now() == Fp32Gemm::onednn) return "oneDNN " + detail::dnnl_f32_impl(M, N, K) + " (forced)";
  if (!detail::dnnl_f32_preferred()) return "Eigen (oneDNN's float kernel on this CPU is not its AVX-512 brgemm)";
  const std::string impl = detail::dnnl_f32_impl(M, N, K);
  if (!detail::dnnl_f32_kernel_ok(impl)) return "Eigen (oneDNN's float kernel for this shape is " + impl + ")";
  return "oneDNN " + impl;
}
#else
inline bool gemm_f32_dnnl(RowMapS<float>, CRowMapS<float>, bool, CRowMapS<float>, bool, bool) { return false; }
inline std::string gemm_f32_impl(long, long, long) { return "Eigen (built without oneDNN)"; }
#endif

}  // namespace fbt
