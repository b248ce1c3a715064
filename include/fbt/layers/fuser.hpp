// fbt/layers/fuser.hpp: the feedback fuser contract, u = Fuse(s, e) (spec section 2), and what the
// library provides around it.
//
// A fuser is a layer type F (a user's as well as the built-in GluFuser, GatedAddFuser, ConcatFuser) with
//   using Scalar = T;  static constexpr const char* name = "...";    the config's `fuser` value
//   explicit F(const FuserArgs&)                                     built from the model's sizes and its options
//   static void declare_options(OptionList&)                         optional: its options (name, type, default,
//                                                                    range, help), read from FuserArgs::options
//   void declare(const ParamRegistry<T>& r)                          its parameters; r is scoped to model.feedback.
//   struct Cache;                                                    one pass's activations and scratch
//   template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache&, int N, bool grad) const
//   template <class Be> void forward(Be&, const Weights<T>&, Cache&, const T* s, const T* e, const T* pre, T* u, int N) const
//   template <class Be> void backward(Be&, const Weights<T>&, const Cache&, const T* s, const T* e, const T* pre,
//                                     const T* du, T* ds, T* de, T* dpre, int N) const
// s (N, D) is the previous position's fed-back state (already shifted), e (N, D) the token's embedding,
// u (N, D) the output (overwritten; the model then applies N_in). Backward ACCUMULATES ds (null when the
// pass is detached: skip it), de and dpre (the gradient of the precompute, below) and the parameter
// gradients in w.grad. du is zero on rows that did not use the fuser (plain positions).
// `keep` slices live as long as the pass (what backward reads); `temp` slices are valid only inside
// one call (forward or backward) and are shared with every other layer (layers/contract.hpp).
//
// Optional, an e-only precompute shared by all passes of a step (and tabulated per token by the decoder):
//   int pre_width() const;                                           P, the columns of pre (N, P)
//   struct PreCache;  alloc_pre(be, keep, temp, PreCache&, N, grad)  what pre_backward reads
//   pre_forward(be, w, PreCache&, const T* e, T* pre, int N)         pre must depend on each row of e only
//   pre_backward(be, w, const PreCache&, const T* e, const T* dpre, T* de, int N)   dpre summed over passes
// Optional diagnostics of a fed-back pass (spec 6), reported with the step's statistics:
//   FuserStats diagnostics(Be&, const Weights<T>&, const Cache&, const FuserPass<T>&) const
// A fuser's options are recorded in the config (fuser_options) and the checkpoint; a fuser may also
// specialize fbt::FuserConfig (model/builder.hpp) to be built from, and recorded in, a ModelConfig its own way. NoFuser (fuser "none") is the baseline: no feedback.
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "../core/options.hpp"
#include "rmsnorm.hpp"

namespace fbt {

/// What a fuser is built from: the model's sizes and the fuser's own options (the builder fills it from
/// the config: options resolved against the fuser's declare_options, core/options.hpp).
struct FuserArgs {
  int hidden_size = 0;              ///< D
  double rms_norm_eps = 1e-6;       ///< for the fuser's own norms
  double initializer_range = 0.02;  ///< std of a normal init
  OptionValues options{};           ///< fuser_options, checked, every declared option present (empty for a fuser built by hand)
};

/// \brief A fuser F built by hand with its options: `given` checked against F::declare_options (unknown
/// key, type, range: fbt::Error naming "fuser_options.<key>"), the defaults filled in.
template <class F> F make_fuser(FuserArgs a, const Options& given = {}) {
  a.options = OptionValues::resolve(declared_options<F>(), given, "fuser_options", std::string("fuser \"") + F::name + "\"");
  return F(a);
}

/// What a fuser reports about one fed-back pass (zero: not reported).
struct FuserStats {
  double gate_mean = 0, gate_std = 0;  ///< a gated fuser's gate over fed-back rows
  double feedback_ratio = 0;           ///< ||feedback term|| / ||e|| over fed-back rows (additive fusers)
};

/// The rows a fuser's diagnostics look at: one pass's inputs and output, and which rows were fed back.
template <class T> struct FuserPass {
  const T* s = nullptr;     ///< (N, D) fed-back state
  const T* e = nullptr;     ///< (N, D) embeddings
  const T* pre = nullptr;   ///< (N, P) the precompute (null without one)
  const T* u = nullptr;     ///< (N, D) the fused vectors (e on plain rows)
  const T* mask = nullptr;  ///< (N) 1 on fed-back rows
  int N = 0;
  long rows = 0;            ///< fed-back rows (> 0)
};

/// \brief The diagnostic of an additive fuser: ||u - base|| / ||e|| over the fed-back rows, how large the
/// state's term is next to the token's (base (N, D): what u would be without the state, e.g. e).
template <class Be, class T> FuserStats feedback_ratio(Be& be, const FuserPass<T>& p, const T* base, int D) {
  FuserStats st;
  const double den = be.masked_sumsq(p.e, p.mask, p.N, D);
  if (den > 0) st.feedback_ratio = std::sqrt(be.masked_diff_sumsq(p.u, base, p.mask, p.N, D) / den);
  return st;
}

/// The baseline's "fuser": the model has no feedback (fuser "none"), and K must be 1.
template <class T> struct NoFuser {
  using Scalar = T;
  static constexpr const char* name = "none";
  static constexpr bool feedback = false;
  struct Cache {};
  NoFuser() = default;
  explicit NoFuser(const FuserArgs&) {}
};

// ---- traits: the optional parts of the contract --------------------------------------------------

template <class F, class = void> struct fuser_is_feedback : std::true_type {};
template <class F> struct fuser_is_feedback<F, std::void_t<decltype(F::feedback)>> : std::integral_constant<bool, F::feedback> {};

template <class F, class = void> struct fuser_has_pre : std::false_type {};
template <class F> struct fuser_has_pre<F, std::void_t<decltype(std::declval<const F&>().pre_width())>> : std::true_type {};

struct NoPreCache {};
template <class F, class = void> struct fuser_pre_cache { using type = NoPreCache; };
template <class F> struct fuser_pre_cache<F, std::void_t<typename F::PreCache>> { using type = typename F::PreCache; };

template <class F, class Be, class = void> struct fuser_has_diagnostics : std::false_type {};
template <class F, class Be>
struct fuser_has_diagnostics<F, Be,
                             std::void_t<decltype(std::declval<const F&>().diagnostics(
                                 std::declval<Be&>(), std::declval<const Weights<typename F::Scalar>&>(),
                                 std::declval<const typename F::Cache&>(), std::declval<const FuserPass<typename F::Scalar>&>()))>>
    : std::true_type {};

namespace detail {
template <class F, class = void> struct has_feedback_member : std::false_type {};
template <class F> struct has_feedback_member<F, std::void_t<decltype(bool(std::declval<const F&>().feedback()))>> : std::true_type {};
template <class F, class = void> struct has_type_name_member : std::false_type {};
template <class F> struct has_type_name_member<F, std::void_t<decltype(std::string(std::declval<const F&>().type_name()))>> : std::true_type {};
}  // namespace detail

/// The name of fuser f (its type's static name, or what an erased fuser holds).
template <class F> std::string fuser_name(const F& f) {
  if constexpr (detail::has_type_name_member<F>::value) return f.type_name();
  else return (void)f, std::string(F::name);
}

/// \brief Calls the optional parts of a fuser (doing nothing, or returning 0, where it has none).
template <class F> struct FuserOps {
  using T = typename F::Scalar;
  using PreCache = typename fuser_pre_cache<F>::type;
  static constexpr bool has_pre = fuser_has_pre<F>::value;

  static int pre_width(const F& f) {
    if constexpr (has_pre) return f.pre_width();
    else return 0;
  }
  template <class Be> static void alloc_pre(const F& f, const Be& be, Carver<T>& keep, Carver<T>& temp, PreCache& pc, int N, bool grad) {
    if constexpr (has_pre) f.alloc_pre(be, keep, temp, pc, N, grad);
  }
  template <class Be> static void pre_forward(const F& f, Be& be, const Weights<T>& w, PreCache& pc, const T* e, T* pre, int N) {
    if constexpr (has_pre) f.pre_forward(be, w, pc, e, pre, N);
  }
  template <class Be>
  static void pre_backward(const F& f, Be& be, const Weights<T>& w, const PreCache& pc, const T* e, const T* dpre, T* de, int N) {
    if constexpr (has_pre) f.pre_backward(be, w, pc, e, dpre, de, N);
  }
  template <class Be> static FuserStats diagnostics(const F& f, Be& be, const Weights<T>& w, const typename F::Cache& c, const FuserPass<T>& p) {
    if constexpr (fuser_has_diagnostics<F, Be>::value) return f.diagnostics(be, w, c, p);
    else return FuserStats{};
  }
};

}  // namespace fbt
