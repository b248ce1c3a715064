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
//
// The parts of PreNormBlock<Attn, Mlp> (checked by the block itself, check_attention / check_mlp):
// with T = Scalar, both provide
//   using Scalar = T;  using Spec = ...;  a constructor from Spec;  Spec::hidden_size (D)
//   void declare(const ParamRegistry<T>&)                       parameters under self_attn. / mlp.
//   struct Cache;  alloc(be, keep, temp, Cache&, int B, int T, bool grad)
//   forward(be, w, Cache&, const T* x, T* y, const PassShape&)            y (N, D) += part(x); x the normed input
//   backward(be, w, const Cache&, const T* dy, T* dx, const T* x, const PassShape&)   dx += ..., grads +=
//   struct DecodeCache;  alloc_decode(be, Carver<T>&, DecodeCache&, int R)
//   decode(be, w, const DecodeCache&, const T* x, T* y, const DecodeStep<T>&)  y (R, D) += part(x)
// and the attention also the KV cache's view of it:
//   int kv_width();  std::pair<const T*, const T*> kv(const Cache&)      keys/values a prefill commits
// The stages of Attention<T, Proj, Kernel, Out> (layers/attention.hpp): check_attention_stages, run by
// check_attention for an attention that names its stages (ProjStage, KernelStage, OutStage).
// A fuser: see layers/fuser.hpp.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "attention.hpp"
#include "common.hpp"
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

// attention and MLP members (the parts of a PreNormBlock)
template <class X, class = void> struct part_spec : std::false_type {};
template <class X>
struct part_spec<X, std::void_t<typename X::Spec, decltype(int(std::declval<const typename X::Spec&>().hidden_size)),
                                decltype(X(std::declval<const typename X::Spec&>()))>> : std::true_type {};
template <class X, class Be, class T, class = void> struct part_forward : std::false_type {};
template <class X, class Be, class T>
struct part_forward<X, Be, T,
                    std::void_t<decltype(std::declval<const X&>().forward(std::declval<Be&>(), std::declval<const Weights<T>&>(),
                                                                          std::declval<typename X::Cache&>(), std::declval<const T*>(),
                                                                          std::declval<T*>(), std::declval<const PassShape&>()))>>
    : std::true_type {};
template <class X, class Be, class T, class = void> struct part_backward : std::false_type {};
template <class X, class Be, class T>
struct part_backward<X, Be, T,
                     std::void_t<decltype(std::declval<const X&>().backward(std::declval<Be&>(), std::declval<const Weights<T>&>(),
                                                                            std::declval<const typename X::Cache&>(), std::declval<const T*>(),
                                                                            std::declval<T*>(), std::declval<const T*>(),
                                                                            std::declval<const PassShape&>()))>>
    : std::true_type {};
template <class X, class Be, class T, class = void> struct part_alloc_decode : std::false_type {};
template <class X, class Be, class T>
struct part_alloc_decode<X, Be, T,
                         std::void_t<decltype(std::declval<const X&>().alloc_decode(std::declval<const Be&>(), std::declval<Carver<T>&>(),
                                                                                    std::declval<typename X::DecodeCache&>(), 1))>>
    : std::true_type {};
template <class X, class Be, class T, class = void> struct part_decode : std::false_type {};
template <class X, class Be, class T>
struct part_decode<X, Be, T,
                   std::void_t<decltype(std::declval<const X&>().decode(std::declval<Be&>(), std::declval<const Weights<T>&>(),
                                                                        std::declval<const typename X::DecodeCache&>(), std::declval<const T*>(),
                                                                        std::declval<T*>(), std::declval<const DecodeStep<T>&>()))>>
    : std::true_type {};

// the stages of Attention<T, Proj, Kernel, Out> (layers/attention.hpp); X the stage, decl<U>() a value of type U
template <class U> std::add_rvalue_reference_t<U> decl() noexcept;  // std::declval, shorter
#define FBT_STAGE_TRAIT(trait, ...)                                                   \
  template <class X, class Be, class T, class = void> struct trait : std::false_type {}; \
  template <class X, class Be, class T> struct trait<X, Be, T, std::void_t<decltype(__VA_ARGS__)>> : std::true_type {};
FBT_STAGE_TRAIT(proj_caches, decl<typename X::Cache&>().qr, decl<typename X::Cache&>().kr, decl<typename X::Cache&>().v, decl<typename X::Cache&>().dqr,
                decl<typename X::Cache&>().dkr, decl<typename X::Cache&>().dv, decl<typename X::DecodeCache&>().q, decl<typename X::DecodeCache&>().k,
                decl<typename X::DecodeCache&>().v)
FBT_STAGE_TRAIT(proj_declare, decl<X&>().declare(decl<const ParamRegistry<T>&>()), decl<X&>().declare_norms(decl<const ParamRegistry<T>&>()))
FBT_STAGE_TRAIT(proj_alloc, decl<const X&>().alloc(decl<const Be&>(), decl<Carver<T>&>(), decl<Carver<T>&>(), decl<typename X::Cache&>(), 1, true),
                decl<const X&>().alloc_decode(decl<const Be&>(), decl<Carver<T>&>(), decl<typename X::DecodeCache&>(), 1))
FBT_STAGE_TRAIT(proj_run, decl<const X&>().forward(decl<Be&>(), decl<const Weights<T>&>(), decl<typename X::Cache&>(), decl<const T*>(), decl<const PassShape&>()),
                decl<const X&>().backward(decl<Be&>(), decl<const Weights<T>&>(), decl<const typename X::Cache&>(), decl<T*>(), decl<const T*>(), decl<const PassShape&>()),
                decl<const X&>().decode(decl<Be&>(), decl<const Weights<T>&>(), decl<const typename X::DecodeCache&>(), decl<const T*>(), decl<const DecodeStep<T>&>()))
FBT_STAGE_TRAIT(kernel_caches, decl<typename X::Cache&>().ao, decl<typename X::Cache&>().dao, decl<typename X::DecodeCache&>().ao)
FBT_STAGE_TRAIT(kernel_alloc, decl<const X&>().alloc(decl<const Be&>(), decl<Carver<T>&>(), decl<Carver<T>&>(), decl<typename X::Cache&>(), 1, 1, true),
                decl<const X&>().alloc_decode(decl<const Be&>(), decl<Carver<T>&>(), decl<typename X::DecodeCache&>(), 1))
FBT_STAGE_TRAIT(kernel_run, decl<const X&>().forward(decl<Be&>(), decl<typename X::Cache&>(), decl<const T*>(), decl<const T*>(), decl<const T*>(), decl<const PassShape&>()),
                decl<const X&>().backward(decl<Be&>(), decl<const typename X::Cache&>(), decl<T*>(), decl<T*>(), decl<T*>(), decl<const T*>(), decl<const T*>(),
                                       decl<const T*>(), decl<const PassShape&>()),
                decl<const X&>().decode(decl<Be&>(), decl<const typename X::DecodeCache&>(), decl<const T*>(), decl<const T*>(), decl<const T*>(),
                                     decl<const DecodeStep<T>&>()))
FBT_STAGE_TRAIT(out_declare, decl<X&>().declare(decl<const ParamRegistry<T>&>()))
FBT_STAGE_TRAIT(out_alloc, decl<const X&>().alloc(decl<const Be&>(), decl<Carver<T>&>(), decl<Carver<T>&>(), decl<typename X::Cache&>(), 1, true),
                decl<const X&>().alloc_decode(decl<const Be&>(), decl<Carver<T>&>(), decl<typename X::DecodeCache&>(), 1))
FBT_STAGE_TRAIT(out_forward, decl<const X&>().forward(decl<Be&>(), decl<const Weights<T>&>(), decl<typename X::Cache&>(), decl<const T*>(), decl<const T*>(), decl<T*>(), 1))
FBT_STAGE_TRAIT(out_backward, decl<const X&>().backward(decl<Be&>(), decl<const Weights<T>&>(), decl<const typename X::Cache&>(), decl<const T*>(), decl<const T*>(),
                                                     decl<const T*>(), decl<T*>(), decl<T*>(), 1))
FBT_STAGE_TRAIT(out_decode, decl<const X&>().decode(decl<Be&>(), decl<const Weights<T>&>(), decl<const typename X::DecodeCache&>(), decl<const T*>(), decl<const T*>(),
                                                 decl<T*>(), 1))
#undef FBT_STAGE_TRAIT
template <class X, class = void> struct has_stages : std::false_type {};
template <class X> struct has_stages<X, std::void_t<typename X::ProjStage, typename X::KernelStage, typename X::OutStage>> : std::true_type {};

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

/// \brief The members shared by a block's attention and MLP parts; `what` starts each message.
#define FBT_CHECK_BLOCK_PART(P, Be, what)                                                                                             \
  static_assert(detail::has_scalar<P>::value, what ": needs `using Scalar = T;` (float or double, the block's)");                  \
  using T = typename P::Scalar;                                                                                                     \
  static_assert(detail::part_spec<P>::value,                                                                                        \
                what ": needs `using Spec = ...` with an `int hidden_size` (D) and a constructor from `const Spec&` (the block builds " \
                    "it from its sizes)");                                                                                          \
  static_assert(detail::has_cache<P>::value, what ": needs a nested `struct Cache` (one pass's activations, pointers into the workspace)"); \
  static_assert(detail::has_declare<P, T>::value, what ": needs `void declare(const fbt::ParamRegistry<T>&)` that registers its parameters"); \
  static_assert(detail::block_alloc<P, Be, T>::value,                                                                               \
                what ": needs `template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache&, int B, int T, "   \
                    "bool grad) const` (lays out its cache)");                                                                      \
  static_assert(detail::part_forward<P, Be, T>::value,                                                                              \
                what ": needs `template <class Be> void forward(Be&, const Weights<T>&, Cache&, const T* x, T* y, const PassShape&) " \
                    "const` (y += part(x), into the residual)");                                                                   \
  static_assert(detail::part_backward<P, Be, T>::value,                                                                             \
                what ": needs `template <class Be> void backward(Be&, const Weights<T>&, const Cache&, const T* dy, T* dx, const T* " \
                    "x, const PassShape&) const` (dx and the parameter gradients accumulate)");                                    \
  static_assert(detail::has_decode_cache<P>::value, what ": needs a nested `struct DecodeCache` (one decoding step's buffers)");    \
  static_assert(detail::part_alloc_decode<P, Be, T>::value,                                                                         \
                what ": needs `template <class Be> void alloc_decode(const Be&, Carver<T>&, DecodeCache&, int R) const`");          \
  static_assert(detail::part_decode<P, Be, T>::value,                                                                               \
                what ": needs `template <class Be> void decode(Be&, const Weights<T>&, const DecodeCache&, const T* x, T* y, "      \
                    "const DecodeStep<T>&) const` (y += part(x) for R new positions, KV-cached)")

/// \brief Compile-time check of the stages of Attention<T, Proj, Kernel, Out> on backend Be (layers/attention.hpp,
/// docs/api.md "Attention in stages"): what a stage of your own must provide.
template <class Proj, class Kernel, class Out, class Be> constexpr bool check_attention_stages() {
  using T = typename Proj::Scalar;
  static_assert(detail::has_cache<Proj>::value && detail::has_decode_cache<Proj>::value && detail::proj_caches<Proj, Be, T>::value,
                "fbt attention projection stage: needs `struct Cache` with T* qr, kr, v (its outputs) and dqr, dkr, dv (their gradients, "
                "filled by the kernel's backward), and `struct DecodeCache` with T* q, k, v");
  static_assert(detail::proj_declare<Proj, Be, T>::value,
                "fbt attention projection stage: needs `void declare(const ParamRegistry<T>&)` (q, k, v projections) and "
                "`void declare_norms(const ParamRegistry<T>&)` (registered after the output stage's, Qwen3's order)");
  static_assert(detail::proj_alloc<Proj, Be, T>::value,
                "fbt attention projection stage: needs `alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache&, int N, bool grad) const` "
                "and `alloc_decode(const Be&, Carver<T>&, DecodeCache&, int R) const`");
  static_assert(detail::proj_run<Proj, Be, T>::value,
                "fbt attention projection stage: needs `forward(Be&, const Weights<T>&, Cache&, const T* x, const PassShape&) const`, "
                "`backward(Be&, const Weights<T>&, const Cache&, T* dx, const T* x, const PassShape&) const` and "
                "`decode(Be&, const Weights<T>&, const DecodeCache&, const T* x, const DecodeStep<T>&) const`");
  static_assert(detail::has_cache<Kernel>::value && detail::has_decode_cache<Kernel>::value && detail::kernel_caches<Kernel, Be, T>::value,
                "fbt attention kernel stage: needs `struct Cache` with T* ao (its output) and dao (its gradient, filled by the output "
                "stage's backward), and `struct DecodeCache` with T* ao");
  static_assert(detail::kernel_alloc<Kernel, Be, T>::value,
                "fbt attention kernel stage: needs `alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache&, int B, int T, bool grad) "
                "const` and `alloc_decode(const Be&, Carver<T>&, DecodeCache&, int R) const`");
  static_assert(detail::kernel_run<Kernel, Be, T>::value,
                "fbt attention kernel stage: needs `forward(Be&, Cache&, const T* q, const T* k, const T* v, const PassShape&) const`, "
                "`backward(Be&, const Cache&, T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const PassShape&) const` and "
                "`decode(Be&, const DecodeCache&, const T* q, const T* k, const T* v, const DecodeStep<T>&) const`");
  static_assert(detail::has_cache<Out>::value && detail::has_decode_cache<Out>::value && detail::out_declare<Out, Be, T>::value,
                "fbt attention output stage: needs `struct Cache`, `struct DecodeCache` and `void declare(const ParamRegistry<T>&)`");
  static_assert(detail::out_alloc<Out, Be, T>::value,
                "fbt attention output stage: needs `alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache&, int N, bool grad) const` "
                "and `alloc_decode(const Be&, Carver<T>&, DecodeCache&, int R) const`");
  static_assert(detail::out_forward<Out, Be, T>::value,
                "fbt attention output stage: needs `forward(Be&, const Weights<T>&, Cache&, const T* x, const T* o, T* y, int N) const` "
                "(y += out(o), x the attention's input)");
  static_assert(detail::out_backward<Out, Be, T>::value,
                "fbt attention output stage: needs `backward(Be&, const Weights<T>&, const Cache&, const T* x, const T* o, const T* dy, "
                "T* dx, T* d_o, int N) const` (d_o, dx and the parameter gradients accumulate)");
  static_assert(detail::out_decode<Out, Be, T>::value,
                "fbt attention output stage: needs `decode(Be&, const Weights<T>&, const DecodeCache&, const T* x, const T* o, T* y, "
                "int R) const`");
  return true;
}

/// \brief Compile-time check that A can be the attention part of a PreNormBlock on backend Be (the file comment).
template <class A, class Be> constexpr bool check_attention() {
  FBT_CHECK_BLOCK_PART(A, Be, "fbt attention (a PreNormBlock's Attn)");
  static_assert(detail::block_kv<A, T>::value,
                "fbt attention (a PreNormBlock's Attn): needs `int kv_width() const` and `std::pair<const T*, const T*> kv(const Cache&) "
                "const` (the rotated keys and the values a prefill commits to the KV cache)");
  if constexpr (detail::has_stages<A>::value)
    static_assert(check_attention_stages<typename A::ProjStage, typename A::KernelStage, typename A::OutStage, Be>());
  return true;
}

/// \brief Compile-time check that M can be the MLP part of a PreNormBlock on backend Be (the file comment).
template <class M, class Be> constexpr bool check_mlp() {
  FBT_CHECK_BLOCK_PART(M, Be, "fbt mlp (a PreNormBlock's Mlp)");
  return true;
}
#undef FBT_CHECK_BLOCK_PART

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

// PreNormBlock checks its parts with check_attention / check_mlp above, so block.hpp comes after them
// (and including this header still gives the block).
#include "block.hpp"
