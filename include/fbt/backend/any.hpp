// fbt/backend/any.hpp: the backend contract of backend/backend.hpp as a small virtual interface,
// AnyBackend<T>: what an erased piece (a fuser or a block in its slot, layers/any_piece.hpp) runs on, so
// that a piece's code is compiled once and runs on every backend (ggml's backend vtable).
//
//   BackendRef<Be> ref(be);          // any backend (CpuBackend<T>, check::HostBackend, cuda::CudaBackend)
//   AnyBackend<T>& any = ref;        // ... seen through the interface: one virtual call per operation
//   piece.forward(any, w, ...);      // the piece's template code, instantiated once with Be = AnyBackend<T>
//
// Every operation a layer calls is here with the contract's signature; the memory operations for T and int
// (a piece never needs the backend's own buffer type: its memory is carved from the workspace). An
// operation moves a whole (N, D) array or more, so the call costs nothing next to it (docs/PERFORMANCE.md).
// The step, the decoder and the trainer still call their backend directly: only the pieces go through here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "backend.hpp"

namespace fbt {

// The operations, once: X(return type, name, (parameters), (arguments)). T is the backend's scalar.
#define FBT_ANY_BACKEND_OPS(X)                                                                                                                  \
  X(void, upload, (T * dst, const T* src, std::size_t n), (dst, src, n))                                                                        \
  X(void, download, (T * dst, const T* src, std::size_t n), (dst, src, n))                                                                      \
  X(void, copy, (T * dst, const T* src, std::size_t n), (dst, src, n))                                                                          \
  X(void, zero, (T * p, std::size_t n), (p, n))                                                                                                 \
  X(void, upload, (int* dst, const int* src, std::size_t n), (dst, src, n))                                                                     \
  X(void, download, (int* dst, const int* src, std::size_t n), (dst, src, n))                                                                   \
  X(void, copy, (int* dst, const int* src, std::size_t n), (dst, src, n))                                                                       \
  X(void, zero, (int* p, std::size_t n), (p, n))                                                                                                \
  X(void, sync, (), ())                                                                                                                          \
  X(void, gemm, (T * C, long ldc, const T* A, long lda, bool tA, const T* B, long ldb, bool tB, long M, long N, long K, bool acc),                \
    (C, ldc, A, lda, tA, B, ldb, tB, M, N, K, acc))                                                                                             \
  X(void, rmsnorm_forward, (T * out, T* rstd, const T* inp, const T* w, int R, int C, T eps), (out, rstd, inp, w, R, C, eps))                  \
  X(void, rmsnorm_backward, (T * dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int R, int C),                            \
    (dinp, dw, dout, inp, w, rstd, R, C))                                                                                                       \
  X(void, rope_forward, (T * out, const T* inp, const int* pos, const RopeView<T>& tab, int R, int NH), (out, inp, pos, tab, R, NH))            \
  X(void, rope_backward, (T * dinp, const T* dout, const int* pos, const RopeView<T>& tab, int R, int NH), (dinp, dout, pos, tab, R, NH))       \
  X(void, attention_forward, (T * out, T* state, const T* q, const T* k, const T* v, const int* first, int B, int Tn, int NH, int NKV, int hs), \
    (out, state, q, k, v, first, B, Tn, NH, NKV, hs))                                                                                           \
  X(void, attention_backward,                                                                                                                   \
    (T * dq, T* dk, T* dv, T* scratch, const T* dout, const T* out, const T* state, const T* q, const T* k, const T* v, const int* first,      \
     int B, int Tn, int NH, int NKV, int hs),                                                                                                   \
    (dq, dk, dv, scratch, dout, out, state, q, k, v, first, B, Tn, NH, NKV, hs))                                                               \
  X(void, attention_decode,                                                                                                                     \
    (T * out, const T* q, const T* const* kc, const T* const* vc, const int* len1, int max_len1, int R, int NH, int NKV, int hs),              \
    (out, q, kc, vc, len1, max_len1, R, NH, NKV, hs))                                                                                           \
  X(void, kv_append, (T* const* kc, T* const* vc, const T* k, const T* v, const int* pos, int R, int KD), (kc, vc, k, v, pos, R, KD))          \
  X(void, gather_rows, (T * dst, const T* const* src, const T* mask, int R, int C), (dst, src, mask, R, C))                                    \
  X(void, scatter_rows, (T* const* dst, const T* src, int R, int C), (dst, src, R, C))                                                         \
  X(void, swiglu_forward, (T * h, const T* g, const T* u, std::size_t n), (h, g, u, n))                                                        \
  X(void, swiglu_backward, (T * dg, T* du, const T* dh, const T* g, const T* u, std::size_t n), (dg, du, dh, g, u, n))                         \
  X(void, sigmoid_gate_forward, (T * y, const T* a, const T* z, std::size_t n), (y, a, z, n))                                                  \
  X(void, sigmoid_gate_backward, (T * da, T* dz, const T* dy, const T* a, const T* z, std::size_t n), (da, dz, dy, a, z, n))                   \
  X(void, mul, (T * y, const T* a, const T* b, std::size_t n), (y, a, b, n))                                                                   \
  X(void, mul_add, (T * y, const T* a, const T* b, std::size_t n), (y, a, b, n))                                                               \
  X(void, mul_backward, (T * da, T* db, const T* dy, const T* a, const T* b, std::size_t n), (da, db, dy, a, b, n))                            \
  X(void, scale_groups, (T * y, const T* x, const T* s, int R, int G, int C), (y, x, s, R, G, C))                                              \
  X(void, scale_groups_backward, (T * dx, T* ds, const T* dy, const T* x, const T* s, int R, int G, int C), (dx, ds, dy, x, s, R, G, C))       \
  X(void, sigmoid, (T * y, const T* z, std::size_t n), (y, z, n))                                                                              \
  X(void, sigmoid_backward, (T * dz, const T* dy, const T* y, std::size_t n), (dz, dy, y, n))                                                   \
  X(void, axpby, (T * y, T a, const T* x, T b, std::size_t n), (y, a, x, b, n))                                                                \
  X(void, add, (T * y, const T* x, std::size_t n), (y, x, n))                                                                                   \
  X(void, scale, (T * x, double s, std::size_t n), (x, s, n))                                                                                   \
  X(void, copy_plain_rows, (T * dst, const T* src, const T* mask, int R, int C), (dst, src, mask, R, C))                                       \
  X(void, move_plain_rows, (T * dst, T* src, const T* mask, int R, int C), (dst, src, mask, R, C))                                             \
  X(void, shift_right_forward, (T * out, const T* inp, int B, int Tn, int C), (out, inp, B, Tn, C))                                            \
  X(void, shift_right_backward, (T * dinp, const T* dout, int B, int Tn, int C), (dinp, dout, B, Tn, C))                                       \
  X(void, embedding_forward, (T * out, const int* tokens, const T* E, int N, int V, int C), (out, tokens, E, N, V, C))                         \
  X(void, embedding_backward, (T * dE, const T* dout, const int* tokens, int N, int V, int C), (dE, dout, tokens, N, V, C))                     \
  X(void, bias_forward, (T * out, const T* b, int R, int C), (out, b, R, C))                                                                   \
  X(void, bias_backward, (T * db, const T* dout, int R, int C), (db, dout, R, C))                                                              \
  X(void, jitter_add, (T * out, const T* src, std::uint64_t seed, int row_offset, int B, std::size_t row_len, double sigma),                    \
    (out, src, seed, row_offset, B, row_len, sigma))                                                                                            \
  X(double, softmax_xent_forward, (T * logits, T* losses, T* lse, const int* targets, int N, int V, double z), (logits, losses, lse, targets, N, V, z)) \
  X(void, softmax_xent_backward, (T * probs, const T* lse, const int* targets, int N, int V, double s, double z), (probs, lse, targets, N, V, s, z)) \
  X(void, adamw, (T * p, const T* g, T* m, T* v, std::size_t n, const AdamWRates<T>& r, T wd), (p, g, m, v, n, r, wd))                        \
  X(void, row_sumsq, (T * out, const T* x, int R, int C), (out, x, R, C))                                                                      \
  X(void, row_div_sqrt, (T * x, const T* v, int R, int C, T eps), (x, v, R, C, eps))                                                           \
  X(double, sum_squares, (const T* x, std::size_t n), (x, n))                                                                                   \
  X(double, masked_sumsq, (const T* x, const T* mask, int R, int C), (x, mask, R, C))                                                          \
  X(double, masked_diff_sumsq, (const T* a, const T* b, const T* mask, int R, int C), (a, b, mask, R, C))                                      \
  X(SumPair, masked_sigmoid_moments, (const T* z, const T* mask, int R, int C), (z, mask, R, C))

/// Two sums a reduction returns (masked_sigmoid_moments).
using SumPair = std::pair<double, double>;

/// \brief The backend as a virtual interface (one instance per backend object: BackendRef). T = Scalar.
template <class T> struct AnyBackend {
  using Scalar = T;
  static constexpr const char* name = "any";
  virtual ~AnyBackend() = default;
  /// The name of the backend behind the interface ("cpu", "host", "cuda").
  virtual const char* backend_name() const = 0;
  /// Elements attention's state and backward scratch need (backend.hpp).
  virtual std::size_t attention_state_size(int B, int Tn, int NH) const = 0;
  virtual std::size_t attention_scratch_size(int B, int Tn, int NH) const = 0;
#define FBT_DECLARE_OP(R, op, P, A) virtual R op P = 0;
  FBT_ANY_BACKEND_OPS(FBT_DECLARE_OP)
#undef FBT_DECLARE_OP
};

/// \brief Backend Be seen as an AnyBackend: each operation calls be's own. Holds a pointer (no copy of the
/// backend's state, e.g. the host stand-in's bf16 switch); costs nothing to make.
template <class Be> class BackendRef final : public AnyBackend<typename Be::Scalar> {
 public:
  using T = typename Be::Scalar;
  explicit BackendRef(Be& be) : be_(&be) {}
  /// For a piece's alloc, which only asks sizes (const).
  explicit BackendRef(const Be& be) : be_(const_cast<Be*>(&be)) {}
  const char* backend_name() const override { return Be::name; }
  std::size_t attention_state_size(int B, int Tn, int NH) const override { return be_->attention_state_size(B, Tn, NH); }
  std::size_t attention_scratch_size(int B, int Tn, int NH) const override { return be_->attention_scratch_size(B, Tn, NH); }
#define FBT_FORWARD_OP(R, op, P, A) \
  R op P override { return be_->op A; }
  FBT_ANY_BACKEND_OPS(FBT_FORWARD_OP)
#undef FBT_FORWARD_OP

 private:
  Be* be_;
};

template <class Be> struct is_any_backend : std::is_base_of<AnyBackend<typename Be::Scalar>, Be> {};

/// \brief fn(AnyBackend<T>&) with be itself when it is one, else with a BackendRef to it.
template <class Be, class Fn> decltype(auto) with_any_backend(Be& be, Fn&& fn) {
  using T = typename std::remove_const<Be>::type::Scalar;
  if constexpr (std::is_base_of<AnyBackend<T>, std::remove_const_t<Be>>::value) {
    return fn(be);
  } else {
    BackendRef<std::remove_const_t<Be>> ref(be);
    return fn(static_cast<std::conditional_t<std::is_const<Be>::value, const AnyBackend<T>&, AnyBackend<T>&>>(ref));
  }
}

}  // namespace fbt
