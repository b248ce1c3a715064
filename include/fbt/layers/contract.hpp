// fbt/layers/contract.hpp: the written contracts of a block and a fuser, checked at compile time.
//
// The model (model/model.hpp) calls fbt::check_block<Block, Be>() and fbt::check_fuser<Fuser, Be>()
// for the types it is given, so a user's type that lacks a member fails with a message that names the
// member and says what it is for, instead of a page of template errors.
//
// Caches. A layer lays out what it needs for one pass with
//   alloc(be, Carver<T>& keep, Carver<T>& temp, Cache&, dims..., bool grad)
// `keep` slices belong to this layer and pass and live until its backward (with grad) or until the
// next pass (without); `temp` slices are shared with every other layer and pass and are valid only
// inside one call (a forward, a backward, a decoding step): the norm outputs that backward recomputes,
// and backward's scratch. Everything lives in one buffer laid out once per shape (core/arena.hpp), so a
// step allocates nothing.
//
// A block B (layers/block.hpp PreNormBlock is the standard one) provides, with T = B::Scalar:
//   void declare(const ParamRegistry<T>&)                       parameters under model.layers.{i}.
//   struct Cache;  alloc(be, keep, temp, Cache&, int B, int T, bool grad)
//   forward(be, w, Cache&, const T* x, T* out, const PassShape&)           out (N, D) = block(x); out != x
//   backward(be, w, const Cache&, T* dx, const T* x, const PassShape&)     dx: d out in, d x out; grads +=
//   int kv_width(); std::pair<const T*, const T*> kv(const Cache&)         keys/values a prefill commits
//   struct DecodeCache;  alloc_decode(be, Carver<T>&, DecodeCache&, int R)
//   decode(be, w, const DecodeCache&, T* x, const DecodeStep<T>&)          x (R, D) <- block(x), KV-cached
//   LayerSpec layer_spec()                                      its sizes, for the checkpoint's config
// A fuser: see layers/fuser.hpp.
#pragma once

#include <type_traits>
#include <utility>

#include "block.hpp"
#include "fuser.hpp"

namespace fbt {
namespace detail {

template <class X, class = void> struct has_scalar : std::false_type {};
template <class X> struct has_scalar<X, std::void_t<typename X::Scalar>> : std::true_type {};
template <class X, class = void> struct has_cache : std::false_type {};
template <class X> struct has_cache<X, std::void_t<typename X::Cache>> : std::true_type {};
template <class X, class = void> struct has_decode_cache : std::false_type {};
template <class X> struct has_decode_cache<X, std::void_t<typename X::DecodeCache>> : std::true_type {};
template <class X, class = void> struct has_name : std::false_type {};
template <class X> struct has_name<X, std::void_t<decltype(std::string(X::name))>> : std::true_type {};

template <class X, class T, class = void> struct has_declare : std::false_type {};
template <class X, class T>
struct has_declare<X, T, std::void_t<decltype(std::declval<X&>().declare(std::declval<const ParamRegistry<T>&>()))>> : std::true_type {};

// block members
template <class X, class Be, class T, class = void> struct block_alloc : std::false_type {};
template <class X, class Be, class T>
struct block_alloc<X, Be, T,
                   std::void_t<decltype(std::declval<const X&>().alloc(std::declval<const Be&>(), std::declval<Carver<T>&>(),
                                                                        std::declval<Carver<T>&>(), std::declval<typename X::Cache&>(), 1, 1, true))>>
    : std::true_type {};
template <class X, class Be, class T, class = void> struct block_forward : std::false_type {};
template <class X, class Be, class T>
struct block_forward<X, Be, T,
                     std::void_t<decltype(std::declval<const X&>().forward(std::declval<Be&>(), std::declval<const Weights<T>&>(),
                                                                           std::declval<typename X::Cache&>(), std::declval<const T*>(),
                                                                           std::declval<T*>(), std::declval<const PassShape&>()))>>
    : std::true_type {};
template <class X, class Be, class T, class = void> struct block_backward : std::false_type {};
template <class X, class Be, class T>
struct block_backward<X, Be, T,
                      std::void_t<decltype(std::declval<const X&>().backward(std::declval<Be&>(), std::declval<const Weights<T>&>(),
                                                                             std::declval<const typename X::Cache&>(), std::declval<T*>(),
                                                                             std::declval<const T*>(), std::declval<const PassShape&>()))>>
    : std::true_type {};
template <class X, class T, class = void> struct block_kv : std::false_type {};
template <class X, class T>
struct block_kv<X, T,
                std::void_t<decltype(int(std::declval<const X&>().kv_width())),
                            decltype(std::pair<const T*, const T*>(std::declval<const X&>().kv(std::declval<const typename X::Cache&>())))>>
    : std::true_type {};
template <class X, class Be, class T, class = void> struct block_decode : std::false_type {};
template <class X, class Be, class T>
struct block_decode<X, Be, T,
                    std::void_t<decltype(std::declval<const X&>().alloc_decode(std::declval<const Be&>(), std::declval<Carver<T>&>(),
                                                                               std::declval<typename X::DecodeCache&>(), 1)),
                                decltype(std::declval<const X&>().decode(std::declval<Be&>(), std::declval<const Weights<T>&>(),
                                                                         std::declval<const typename X::DecodeCache&>(), std::declval<T*>(),
                                                                         std::declval<const DecodeStep<T>&>()))>>
    : std::true_type {};

// fuser members
template <class X, class Be, class T, class = void> struct fuser_alloc : std::false_type {};
template <class X, class Be, class T>
struct fuser_alloc<X, Be, T,
                   std::void_t<decltype(std::declval<const X&>().alloc(std::declval<const Be&>(), std::declval<Carver<T>&>(),
                                                                        std::declval<Carver<T>&>(), std::declval<typename X::Cache&>(), 1, true))>>
    : std::true_type {};
template <class X, class Be, class T, class = void> struct fuser_forward : std::false_type {};
template <class X, class Be, class T>
struct fuser_forward<X, Be, T,
                     std::void_t<decltype(std::declval<const X&>().forward(std::declval<Be&>(), std::declval<const Weights<T>&>(),
                                                                           std::declval<typename X::Cache&>(), std::declval<const T*>(),
                                                                           std::declval<const T*>(), std::declval<const T*>(),
                                                                           std::declval<T*>(), 1))>>
    : std::true_type {};
template <class X, class Be, class T, class = void> struct fuser_backward : std::false_type {};
template <class X, class Be, class T>
struct fuser_backward<X, Be, T,
                      std::void_t<decltype(std::declval<const X&>().backward(
                          std::declval<Be&>(), std::declval<const Weights<T>&>(), std::declval<const typename X::Cache&>(),
                          std::declval<const T*>(), std::declval<const T*>(), std::declval<const T*>(), std::declval<const T*>(),
                          std::declval<T*>(), std::declval<T*>(), std::declval<T*>(), 1))>>
    : std::true_type {};
template <class X, class Be, class T, class = void> struct fuser_pre : std::false_type {};
template <class X, class Be, class T>
struct fuser_pre<X, Be, T,
                 std::void_t<typename X::PreCache,
                             decltype(std::declval<const X&>().alloc_pre(std::declval<const Be&>(), std::declval<Carver<T>&>(),
                                                                         std::declval<Carver<T>&>(), std::declval<typename X::PreCache&>(), 1, true)),
                             decltype(std::declval<const X&>().pre_forward(std::declval<Be&>(), std::declval<const Weights<T>&>(),
                                                                           std::declval<typename X::PreCache&>(), std::declval<const T*>(),
                                                                           std::declval<T*>(), 1)),
                             decltype(std::declval<const X&>().pre_backward(std::declval<Be&>(), std::declval<const Weights<T>&>(),
                                                                            std::declval<const typename X::PreCache&>(),
                                                                            std::declval<const T*>(), std::declval<const T*>(),
                                                                            std::declval<T*>(), 1))>>
    : std::true_type {};

}  // namespace detail

/// \brief Compile-time check that B is a block fbt can run on backend Be (see the file comment).
template <class B, class Be> constexpr bool check_block() {
  static_assert(detail::has_scalar<B>::value, "fbt block: needs `using Scalar = T;` (float or double)");
  using T = typename B::Scalar;
  static_assert(detail::has_cache<B>::value, "fbt block: needs a nested `struct Cache` (one pass's activations, pointers into the workspace)");
  static_assert(detail::has_declare<B, T>::value,
                "fbt block: needs `void declare(const fbt::ParamRegistry<T>&)` that registers its parameters (scoped to model.layers.{i}.)");
  static_assert(detail::block_alloc<B, Be, T>::value,
                "fbt block: needs `template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache&, int B, int T, bool grad) const`");
  static_assert(detail::block_forward<B, Be, T>::value,
                "fbt block: needs `template <class Be> void forward(Be&, const Weights<T>&, Cache&, const T* x, T* out, const PassShape&) const`");
  static_assert(detail::block_backward<B, Be, T>::value,
                "fbt block: needs `template <class Be> void backward(Be&, const Weights<T>&, const Cache&, T* dx, const T* x, const PassShape&) const` "
                "(dx holds d out on entry and d x on exit; parameter gradients accumulate)");
  static_assert(detail::block_kv<B, T>::value,
                "fbt block: needs `int kv_width() const` and `std::pair<const T*, const T*> kv(const Cache&) const` (the keys and values a "
                "prefill commits to the KV cache)");
  static_assert(detail::has_decode_cache<B>::value, "fbt block: needs a nested `struct DecodeCache` (one decoding step's buffers)");
  static_assert(detail::block_decode<B, Be, T>::value,
                "fbt block: needs `alloc_decode(const Be&, Carver<T>&, DecodeCache&, int R) const` and "
                "`decode(Be&, const Weights<T>&, const DecodeCache&, T* x, const DecodeStep<T>&) const` (KV-cached decoding)");
  return true;
}

/// \brief Compile-time check that F is a fuser fbt can run on backend Be (see layers/fuser.hpp).
template <class F, class Be> constexpr bool check_fuser() {
  static_assert(detail::has_scalar<F>::value, "fbt fuser: needs `using Scalar = T;` (float or double)");
  static_assert(detail::has_name<F>::value, "fbt fuser: needs `static constexpr const char* name` (its value of the config's `fuser` field)");
  static_assert(detail::has_cache<F>::value, "fbt fuser: needs a nested `struct Cache` (one pass's activations; may be empty)");
  if constexpr (fuser_is_feedback<F>::value) {
    using T = typename F::Scalar;
    static_assert(detail::has_declare<F, T>::value,
                  "fbt fuser: needs `void declare(const fbt::ParamRegistry<T>&)` that registers its parameters (scoped to model.feedback.)");
    static_assert(detail::fuser_alloc<F, Be, T>::value,
                  "fbt fuser: needs `template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache&, int N, bool grad) const`");
    static_assert(detail::fuser_forward<F, Be, T>::value,
                  "fbt fuser: needs `template <class Be> void forward(Be&, const Weights<T>&, Cache&, const T* s, const T* e, const T* pre, "
                  "T* u, int N) const`");
    static_assert(detail::fuser_backward<F, Be, T>::value,
                  "fbt fuser: needs `template <class Be> void backward(Be&, const Weights<T>&, const Cache&, const T* s, const T* e, "
                  "const T* pre, const T* du, T* ds, T* de, T* dpre, int N) const` (ds may be null: a detached pass; everything accumulates)");
    static_assert(!fuser_has_pre<F>::value || detail::fuser_pre<F, Be, T>::value,
                  "fbt fuser: it has pre_width(), so it also needs `struct PreCache`, alloc_pre(be, keep, temp, PreCache&, N, grad), "
                  "pre_forward(be, w, PreCache&, e, pre, N) and pre_backward(be, w, const PreCache&, e, dpre, de, N)");
  }
  return true;
}

}  // namespace fbt
