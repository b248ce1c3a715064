// fbt/backend/contract.hpp: the backend contract of backend/backend.hpp, checked at compile time.
//
// fbt::check_backend<Be>() is true when Be provides every type and op the step, the optimizer and the
// decoder call; otherwise compilation stops at the first missing op with a message that names it and
// its signature ("fbt backend: needs void gemm(T* C, long ldc, ...)"), instead of a page of template
// errors deep inside the step. The K-pass step (model/multipass.hpp) and BackendModel
// (model/backend_model.hpp) call it for the backend they run on:
//
//   static_assert(fbt::check_backend<MyBackend>(), "");   // what a new backend checks first
//
// T is Be::Scalar. An op is found when it can be called with arguments of the listed types (so a
// backend may take an int where a long is listed, or be a template). tests/contract/backend_*.cpp are
// backends that lack an op: ctest (contract.*) checks that compiling one fails with the message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "backend.hpp"

namespace fbt {
namespace detail::backend_contract {

template <class X> X v();  // an argument of type X (unevaluated contexts only)

// FBT_BACKEND_OP(op, args...): has_<op><Be, T> is true when Be& can call .op(args...).
#define FBT_BACKEND_OP(op, ...)                                                                                                     \
  template <class Be, class T, class = void> struct has_##op : std::false_type {};                                                  \
  template <class Be, class T> struct has_##op<Be, T, std::void_t<decltype(std::declval<Be&>().op(__VA_ARGS__))>> : std::true_type {};

// memory
FBT_BACKEND_OP(upload, v<T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(download, v<T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(copy, v<T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(zero, v<T*>(), std::size_t(1))
FBT_BACKEND_OP(sync, )
// products
FBT_BACKEND_OP(gemm, v<T*>(), 1L, v<const T*>(), 1L, true, v<const T*>(), 1L, true, 1L, 1L, 1L, true)
// normalisation, rotation, attention
FBT_BACKEND_OP(rmsnorm_forward, v<T*>(), v<T*>(), v<const T*>(), v<const T*>(), 1, 1, T(1))
FBT_BACKEND_OP(rmsnorm_backward, v<T*>(), v<T*>(), v<const T*>(), v<const T*>(), v<const T*>(), v<const T*>(), 1, 1)
FBT_BACKEND_OP(rope_forward, v<T*>(), v<const T*>(), v<const int*>(), v<const RopeView<T>&>(), 1, 1)
FBT_BACKEND_OP(rope_backward, v<T*>(), v<const T*>(), v<const int*>(), v<const RopeView<T>&>(), 1, 1)
FBT_BACKEND_OP(attention_state_size, 1, 1, 1)
FBT_BACKEND_OP(attention_scratch_size, 1, 1, 1)
FBT_BACKEND_OP(attention_forward, v<T*>(), v<T*>(), v<const T*>(), v<const T*>(), v<const T*>(), v<const int*>(), 1, 1, 1, 1, 1)
FBT_BACKEND_OP(attention_backward, v<T*>(), v<T*>(), v<T*>(), v<T*>(), v<const T*>(), v<const T*>(), v<const T*>(), v<const T*>(),
               v<const T*>(), v<const T*>(), v<const int*>(), 1, 1, 1, 1, 1)
FBT_BACKEND_OP(attention_decode, v<T*>(), v<const T*>(), v<const T* const*>(), v<const T* const*>(), v<const int*>(), 1, 1, 1, 1, 1)
FBT_BACKEND_OP(kv_append, v<T* const*>(), v<T* const*>(), v<const T*>(), v<const T*>(), v<const int*>(), 1, 1)
FBT_BACKEND_OP(gather_rows, v<T*>(), v<const T* const*>(), v<const T*>(), 1, 1)
FBT_BACKEND_OP(scatter_rows, v<T* const*>(), v<const T*>(), 1, 1)
// elementwise
FBT_BACKEND_OP(swiglu_forward, v<T*>(), v<const T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(swiglu_backward, v<T*>(), v<T*>(), v<const T*>(), v<const T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(sigmoid_gate_forward, v<T*>(), v<const T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(sigmoid_gate_backward, v<T*>(), v<T*>(), v<const T*>(), v<const T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(mul, v<T*>(), v<const T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(mul_add, v<T*>(), v<const T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(mul_backward, v<T*>(), v<T*>(), v<const T*>(), v<const T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(scale_groups, v<T*>(), v<const T*>(), v<const T*>(), 1, 1, 1)
FBT_BACKEND_OP(scale_groups_backward, v<T*>(), v<T*>(), v<const T*>(), v<const T*>(), v<const T*>(), 1, 1, 1)
FBT_BACKEND_OP(sigmoid, v<T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(sigmoid_backward, v<T*>(), v<const T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(axpby, v<T*>(), T(1), v<const T*>(), T(1), std::size_t(1))
FBT_BACKEND_OP(add, v<T*>(), v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(scale, v<T*>(), 1.0, std::size_t(1))
FBT_BACKEND_OP(copy_plain_rows, v<T*>(), v<const T*>(), v<const T*>(), 1, 1)
FBT_BACKEND_OP(move_plain_rows, v<T*>(), v<T*>(), v<const T*>(), 1, 1)
FBT_BACKEND_OP(shift_right_forward, v<T*>(), v<const T*>(), 1, 1, 1)
FBT_BACKEND_OP(shift_right_backward, v<T*>(), v<const T*>(), 1, 1, 1)
FBT_BACKEND_OP(embedding_forward, v<T*>(), v<const int*>(), v<const T*>(), 1, 1, 1)
FBT_BACKEND_OP(embedding_backward, v<T*>(), v<const T*>(), v<const int*>(), 1, 1, 1)
FBT_BACKEND_OP(bias_forward, v<T*>(), v<const T*>(), 1, 1)
FBT_BACKEND_OP(bias_backward, v<T*>(), v<const T*>(), 1, 1)
FBT_BACKEND_OP(jitter_add, v<T*>(), v<const T*>(), std::uint64_t(1), 1, 1, std::size_t(1), 1.0)
// loss, optimizer, reductions
FBT_BACKEND_OP(softmax_xent_forward, v<T*>(), v<T*>(), v<T*>(), v<const int*>(), 1, 1, 1.0)
FBT_BACKEND_OP(softmax_xent_backward, v<T*>(), v<const T*>(), v<const int*>(), 1, 1, 1.0, 1.0)
FBT_BACKEND_OP(adamw, v<T*>(), v<const T*>(), v<T*>(), v<T*>(), std::size_t(1), v<const AdamWRates<T>&>(), T(1))
FBT_BACKEND_OP(row_sumsq, v<T*>(), v<const T*>(), 1, 1)
FBT_BACKEND_OP(row_div_sqrt, v<T*>(), v<const T*>(), 1, 1, T(1))
FBT_BACKEND_OP(sum_squares, v<const T*>(), std::size_t(1))
FBT_BACKEND_OP(masked_sumsq, v<const T*>(), v<const T*>(), 1, 1)
FBT_BACKEND_OP(masked_diff_sumsq, v<const T*>(), v<const T*>(), v<const T*>(), 1, 1)
FBT_BACKEND_OP(masked_sigmoid_moments, v<const T*>(), v<const T*>(), 1, 1)
#undef FBT_BACKEND_OP

template <class Be, class = void> struct has_scalar : std::false_type {};
template <class Be> struct has_scalar<Be, std::void_t<typename Be::Scalar>> : std::true_type {};
template <class Be, class = void> struct has_buf : std::false_type {};
template <class Be>
struct has_buf<Be, std::void_t<decltype(std::declval<typename Be::template Buf<typename Be::Scalar>&>().resize(std::size_t(1))),
                               decltype(static_cast<typename Be::Scalar*>(std::declval<typename Be::template Buf<typename Be::Scalar>&>().data())),
                               decltype(std::size_t(std::declval<typename Be::template Buf<int>&>().size()))>> : std::true_type {};
template <class Be, class = void> struct has_name : std::false_type {};
template <class Be> struct has_name<Be, std::void_t<decltype(static_cast<const char*>(Be::name))>> : std::true_type {};

/// Be::Scalar, or float when Be has none (its own static_assert says so).
template <class Be, bool = has_scalar<Be>::value> struct scalar_of { using type = float; };
template <class Be> struct scalar_of<Be, true> { using type = typename Be::Scalar; };

}  // namespace detail::backend_contract

/// \brief True when Be provides the whole backend contract (backend/backend.hpp); otherwise a static_assert
/// names the first missing type or op and its signature. T below is Be::Scalar.
template <class Be> constexpr bool check_backend() {
  namespace c = detail::backend_contract;
  using T = typename c::scalar_of<Be>::type;
  static_assert(c::has_scalar<Be>::value, "fbt backend: needs `using Scalar = T;` (the parameters' type)");
  static_assert(c::has_name<Be>::value, "fbt backend: needs `static constexpr const char* name` (e.g. \"cpu\", \"cuda\")");
  static_assert(c::has_buf<Be>::value, "fbt backend: needs `template <class U> using Buf` with resize(n), data(), size() (an owning buffer)");
  // memory
  static_assert(c::has_upload<Be, T>::value, "fbt backend: needs void upload(T* dst, const T* src, size_t n) (host -> backend)");
  static_assert(c::has_download<Be, T>::value, "fbt backend: needs void download(T* dst, const T* src, size_t n) (backend -> host, waits)");
  static_assert(c::has_copy<Be, T>::value, "fbt backend: needs void copy(T* dst, const T* src, size_t n)");
  static_assert(c::has_zero<Be, T>::value, "fbt backend: needs void zero(T* p, size_t n)");
  static_assert(c::has_sync<Be, T>::value, "fbt backend: needs void sync()");
  // products
  static_assert(c::has_gemm<Be, T>::value,
                "fbt backend: needs void gemm(T* C, long ldc, const T* A, long lda, bool tA, const T* B, long ldb, bool tB, long M, long N, long K, bool acc)");
  // normalisation, rotation, attention
  static_assert(c::has_rmsnorm_forward<Be, T>::value,
                "fbt backend: needs void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* w, int R, int C, T eps)");
  static_assert(c::has_rmsnorm_backward<Be, T>::value,
                "fbt backend: needs void rmsnorm_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int R, int C)");
  static_assert(c::has_rope_forward<Be, T>::value,
                "fbt backend: needs void rope_forward(T* out, const T* inp, const int* pos, const RopeView<T>&, int R, int NH)");
  static_assert(c::has_rope_backward<Be, T>::value,
                "fbt backend: needs void rope_backward(T* dinp, const T* dout, const int* pos, const RopeView<T>&, int R, int NH)");
  static_assert(c::has_attention_state_size<Be, T>::value, "fbt backend: needs size_t attention_state_size(int B, int T, int NH)");
  static_assert(c::has_attention_scratch_size<Be, T>::value, "fbt backend: needs size_t attention_scratch_size(int B, int T, int NH)");
  static_assert(c::has_attention_forward<Be, T>::value,
                "fbt backend: needs void attention_forward(T* out, T* state, const T* q, const T* k, const T* v, const int* first, int B, int T, "
                "int NH, int NKV, int hs)");
  static_assert(c::has_attention_backward<Be, T>::value,
                "fbt backend: needs void attention_backward(T* dq, T* dk, T* dv, T* scratch, const T* dout, const T* out, const T* state, "
                "const T* q, const T* k, const T* v, const int* first, int B, int T, int NH, int NKV, int hs)");
  static_assert(c::has_attention_decode<Be, T>::value,
                "fbt backend: needs void attention_decode(T* out, const T* q, const T* const* kc, const T* const* vc, const int* len1, "
                "int max_len1, int R, int NH, int NKV, int hs)");
  static_assert(c::has_kv_append<Be, T>::value,
                "fbt backend: needs void kv_append(T* const* kc, T* const* vc, const T* k, const T* v, const int* pos, int R, int KD)");
  static_assert(c::has_gather_rows<Be, T>::value, "fbt backend: needs void gather_rows(T* dst, const T* const* src, const T* mask, int R, int C)");
  static_assert(c::has_scatter_rows<Be, T>::value, "fbt backend: needs void scatter_rows(T* const* dst, const T* src, int R, int C)");
  // elementwise (n elements)
  static_assert(c::has_swiglu_forward<Be, T>::value, "fbt backend: needs void swiglu_forward(T* h, const T* g, const T* u, size_t n)");
  static_assert(c::has_swiglu_backward<Be, T>::value,
                "fbt backend: needs void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, size_t n)");
  static_assert(c::has_sigmoid_gate_forward<Be, T>::value, "fbt backend: needs void sigmoid_gate_forward(T* y, const T* a, const T* z, size_t n)");
  static_assert(c::has_sigmoid_gate_backward<Be, T>::value,
                "fbt backend: needs void sigmoid_gate_backward(T* da, T* dz, const T* dy, const T* a, const T* z, size_t n)");
  static_assert(c::has_mul<Be, T>::value, "fbt backend: needs void mul(T* y, const T* a, const T* b, size_t n)");
  static_assert(c::has_mul_add<Be, T>::value, "fbt backend: needs void mul_add(T* y, const T* a, const T* b, size_t n)");
  static_assert(c::has_mul_backward<Be, T>::value, "fbt backend: needs void mul_backward(T* da, T* db, const T* dy, const T* a, const T* b, size_t n)");
  static_assert(c::has_scale_groups<Be, T>::value, "fbt backend: needs void scale_groups(T* y, const T* x, const T* s, int R, int G, int C)");
  static_assert(c::has_scale_groups_backward<Be, T>::value,
                "fbt backend: needs void scale_groups_backward(T* dx, T* ds, const T* dy, const T* x, const T* s, int R, int G, int C)");
  static_assert(c::has_sigmoid<Be, T>::value, "fbt backend: needs void sigmoid(T* y, const T* z, size_t n)");
  static_assert(c::has_sigmoid_backward<Be, T>::value, "fbt backend: needs void sigmoid_backward(T* dz, const T* dy, const T* y, size_t n)");
  static_assert(c::has_axpby<Be, T>::value, "fbt backend: needs void axpby(T* y, T a, const T* x, T b, size_t n)");
  static_assert(c::has_add<Be, T>::value, "fbt backend: needs void add(T* y, const T* x, size_t n)");
  static_assert(c::has_scale<Be, T>::value, "fbt backend: needs void scale(T* x, double s, size_t n)");
  // (the elementwise product, multiply-add and per-row / per-head broadcast scale join here)
  static_assert(c::has_copy_plain_rows<Be, T>::value, "fbt backend: needs void copy_plain_rows(T* dst, const T* src, const T* mask, int R, int C)");
  static_assert(c::has_move_plain_rows<Be, T>::value, "fbt backend: needs void move_plain_rows(T* dst, T* src, const T* mask, int R, int C)");
  static_assert(c::has_shift_right_forward<Be, T>::value, "fbt backend: needs void shift_right_forward(T* out, const T* inp, int B, int T, int C)");
  static_assert(c::has_shift_right_backward<Be, T>::value, "fbt backend: needs void shift_right_backward(T* dinp, const T* dout, int B, int T, int C)");
  static_assert(c::has_embedding_forward<Be, T>::value,
                "fbt backend: needs void embedding_forward(T* out, const int* tokens, const T* E, int N, int V, int C)");
  static_assert(c::has_embedding_backward<Be, T>::value,
                "fbt backend: needs void embedding_backward(T* dE, const T* dout, const int* tokens, int N, int V, int C)");
  static_assert(c::has_bias_forward<Be, T>::value, "fbt backend: needs void bias_forward(T* out, const T* b, int R, int C)");
  static_assert(c::has_bias_backward<Be, T>::value, "fbt backend: needs void bias_backward(T* db, const T* dout, int R, int C)");
  static_assert(c::has_jitter_add<Be, T>::value,
                "fbt backend: needs void jitter_add(T* out, const T* src, uint64_t seed, int row_offset, int B, size_t row_len, double sigma)");
  // loss, optimizer, reductions
  static_assert(c::has_softmax_xent_forward<Be, T>::value,
                "fbt backend: needs double softmax_xent_forward(T* logits, T* losses, T* lse, const int* targets, int N, int V, double z)");
  static_assert(c::has_softmax_xent_backward<Be, T>::value,
                "fbt backend: needs void softmax_xent_backward(T* probs, const T* lse, const int* targets, int N, int V, double scale, double z)");
  static_assert(c::has_adamw<Be, T>::value,
                "fbt backend: needs void adamw(T* p, const T* g, T* m, T* v, size_t n, const AdamWRates<T>& r, T wd)");
  static_assert(c::has_row_sumsq<Be, T>::value, "fbt backend: needs void row_sumsq(T* out, const T* x, int R, int C)");
  static_assert(c::has_row_div_sqrt<Be, T>::value, "fbt backend: needs void row_div_sqrt(T* x, const T* v, int R, int C, T eps)");
  static_assert(c::has_sum_squares<Be, T>::value, "fbt backend: needs double sum_squares(const T* x, size_t n)");
  static_assert(c::has_masked_sumsq<Be, T>::value, "fbt backend: needs double masked_sumsq(const T* x, const T* mask, int R, int C)");
  static_assert(c::has_masked_diff_sumsq<Be, T>::value,
                "fbt backend: needs double masked_diff_sumsq(const T* a, const T* b, const T* mask, int R, int C)");
  static_assert(c::has_masked_sigmoid_moments<Be, T>::value,
                "fbt backend: needs std::pair<double, double> masked_sigmoid_moments(const T* z, const T* mask, int R, int C)");
  return true;
}

}  // namespace fbt
