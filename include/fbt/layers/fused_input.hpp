// fbt/layers/fused_input.hpp: the layer-0 input of a full-bandwidth transformer, the paper's core, as one
// layer (spec section 2, paper Eq. 3-4; the fed-back pass of spec section 3).
//
//   pass 1, or a row without feedback:  X_r = N_in(e_r)                  (e_r itself when N_in skips plain rows)
//   a fed-back pass j >= 2:             S   = shift_right(src + U(-sigma, sigma))   src (B*T, D): pass j-1's tapped state
//                                       u_r = Fuse(S_r, e_r) where mask_r = 1, e_r where mask_r = 0 (plain row)
//                                       X_r = N_in(u_r)                   (plain rows: e_r when N_in skips them)
//   a decoding step:                    S_r = the sequence's previous tapped state (gathered by the decoder), the
//                                       mask from the decoding policy; plain rows as in pass 1.
// N_in is an RMSNorm with a learnable gain (model.feedback.in_norm.weight); Fuse is the fuser F
// (layers/fuser.hpp: glu, gated_add, concat or a user's), under model.feedback.*. A row is plain at
// position 0, at a document start and inside a plain prefix (fed_mask). Which plain rows N_in normalises
// is the model's knob input_norm, given here as two flags. With F = NoFuser (a baseline) the layer is
// X = e: no N_in, no fuser, no tensors.
// Forward, backward and the decoding step are here; the model (model/model.hpp) holds this layer, a pass
// (model/pass.hpp) and the decoder (decode/decoder.hpp) call it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "fuser.hpp"
#include "rmsnorm.hpp"

namespace fbt {

/// The jitter of one fed-back pass's carried state (spec 3: one uniform draw in [-sigma, sigma) per element,
/// before the shift; sigma 0: none). Draws are a function of (seed, batch row), so a row split over
/// workers draws the same numbers (backend.hpp, jitter_add).
struct FeedJitter {
  std::uint64_t seed = 0;
  double sigma = 0.0;
  int row_offset = 0;  ///< index of the batch's first row in a larger batch
};

/// \brief The layer-0 input: N_in and the fuser F. Owns no tensors: only the offsets of N_in's gain and of
/// the fuser's parameters, and the two input_norm flags.
/// \tparam T scalar; \tparam F the fuser (NoFuser<T>: a baseline, X = e).
template <class T, class F> struct FusedInput {
  using Scalar = T;
  using Fuser = F;
  /// Whether a fuser of type F can feed back (false for NoFuser); feedback() says whether this one does
  /// (an erased fuser, AnyFuser<T>, knows it only at run time).
  static constexpr bool may_feed_back = fuser_is_feedback<F>::value;

  RMSNorm<T> in_norm;  ///< model.feedback.in_norm (N_in; full-bandwidth models only)
  F fuser;             ///< model.feedback.* (the fuser's own tensors)
  int width = 0;       ///< D, the embedding width (set by declare)
  bool norm_plain = true;          ///< N_in normalises the plain input of pass 1 and of a step without feedback
  bool norm_plain_when_fed = true; ///< N_in normalises the plain rows of a fed-back pass

  FusedInput() = default;
  explicit FusedInput(F f) : fuser(std::move(f)) {}

  /// Whether the fuser feeds the state back (a baseline's NoFuser does not: X = e, no N_in).
  bool feedback() const {
    if constexpr (!may_feed_back) return false;
    else if constexpr (detail::has_feedback_member<F>::value) return fuser.feedback();
    else return true;
  }
  /// Whether N_in normalises the plain input of pass 1 (and of a decoding step without feedback).
  bool norm_plain_pass() const { return feedback() && norm_plain; }
  /// Whether N_in normalises the plain rows of a fed-back pass (its prefix, position 0, document starts).
  bool norm_plain_rows_when_fed() const { return feedback() && norm_plain_when_fed; }

  /// \brief Registers N_in's gain (D) as "<feedback>in_norm.weight" (the model's scope is "model.feedback.")
  /// and then the fuser's tensors. share_gate_norm: the fuser's "<feedback>gate_norm.weight" is made an alias
  /// of N_in's gain (the paper's one input_rmsnorm_1); a fuser that declares no gate norm is then refused.
  /// A baseline declares nothing.
  void declare(const ParamRegistry<T>& feedback, int D, double eps, double gain, bool share_gate_norm) {
    width = D;
    if constexpr (may_feed_back) {
      if (!FusedInput::feedback()) return;
      ParamStore<T>& params = feedback.store();
      in_norm = RMSNorm<T>(D, eps);
      in_norm.declare(feedback.scope("in_norm"), gain);
      const std::string gate = feedback.prefix() + "gate_norm.weight";
      if (share_gate_norm) params.alias(gate, feedback.prefix() + "in_norm.weight");
      fuser.declare(feedback);
      if (share_gate_norm && !params.alias_used(gate))
        throw Error(std::string("fbt::Model: gate_norm \"shared\" makes the fuser's gate norm (") + gate + ") N_in's, but the fuser \"" + fuser_name(fuser) +
                    "\" declares no such tensor (use gate_norm \"separate\")");
    } else {
      (void)feedback, (void)eps, (void)gain, (void)share_gate_norm;
    }
  }

  /// \brief The plain/fused rule of a training pass: mask (B*T, host) = 1 where row (b, t) is fed back, i.e.
  /// t >= max(prefix_b, 1) and t is not a document start (plain (B*T) = 1 at position 0 and document starts);
  /// prefix (B) may be null (= 0). Returns the number of fed-back rows.
  static long fed_mask(T* mask, const std::uint8_t* plain, const int* prefix, int B, int Tn) {
    long fed_rows = 0;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < Tn; ++t) {
        const std::size_t n = std::size_t(b) * Tn + t;
        const bool fed = !plain[n] && t >= (prefix ? prefix[b] : 0);
        mask[n] = fed ? T(1) : T(0);
        fed_rows += fed;
      }
    return fed_rows;
  }

  /// \brief S (B*T, D) = shift_right(src + jitter): row (b, t) gets source row (b, t-1), row (b, 0) zero.
  /// noise (B*T, D) holds the jittered source when jit->sigma > 0 (jit may be null: no jitter).
  template <class Be> void source_forward(Be& be, T* S, T* noise, const T* src, const FeedJitter* jit, int B, int Tn) const {
    if (jit && jit->sigma > 0) {
      be.jitter_add(noise, src, jit->seed, jit->row_offset, B, std::size_t(Tn) * width, jit->sigma);
      src = noise;
    }
    be.shift_right_forward(S, src, B, Tn, width);
  }
  /// \brief dsrc (B*T, D) += shift_right's transpose of dS: source row (b, t) gets dS row (b, t+1). The
  /// jitter is additive, so its backward is the identity.
  template <class Be> void source_backward(Be& be, T* dsrc, const T* dS, int B, int Tn) const {
    be.shift_right_backward(dsrc, dS, B, Tn, width);
  }

  /// \brief X (R, D) = the plain layer-0 input of R rows: N_in(e) (input_norm all), else e (and e for a
  /// baseline). rin (R): N_in's rstd, read by backward.
  template <class Be> void plain_forward(Be& be, const Weights<T>& w, int R, const T* e, T* X, T* rin) const {
    if constexpr (may_feed_back) {
      if (norm_plain_pass()) return in_norm.forward(be, w, X, rin, e, R);
    }
    (void)w, (void)rin;
    be.copy(X, e, std::size_t(R) * width);
  }
  /// \brief dX (R, D) -> de (R, D) +=, for X = plain_forward's output (and N_in's gain gradient).
  template <class Be> void plain_backward(Be& be, const Weights<T>& w, T* de, const T* dX, const T* e, const T* rin, int R) const {
    if constexpr (may_feed_back) {
      if (norm_plain_pass()) return in_norm.backward(be, w, de, dX, e, rin, R);
    }
    (void)w, (void)e, (void)rin;
    be.add(de, dX, std::size_t(R) * width);
  }

  /// \brief X (R, D) = N_in(Fuse(S_r, e_r)) where mask_r = 1; elsewhere N_in(e_r), or e_r when N_in skips
  /// plain rows. pre (R, P) is the fuser's precompute of e (null without one); fc, u (R, D), rin (R) are
  /// what backward reads. in_fed_pass false (a decoding step, whose plain rows start or continue a sequence
  /// without feedback): the plain rows get plain_forward's input, as in pass 1.
  template <class Be>
  void fused_forward(Be& be, const Weights<T>& w, int R, const T* e, const T* S, const T* mask, const T* pre, typename F::Cache& fc, T* u,
                     T* rin, T* X, bool in_fed_pass = true) const {
    static_assert(may_feed_back, "FusedInput::fused_forward needs a feedback fuser");
    fuser.forward(be, w, fc, S, e, pre, u, R);
    be.copy_plain_rows(u, e, mask, R, width);
    in_norm.forward(be, w, X, rin, u, R);
    if (!(in_fed_pass ? norm_plain_rows_when_fed() : norm_plain_pass())) be.copy_plain_rows(X, e, mask, R, width);
  }
  /// \brief Backward of fused_forward (a training pass). dX (R, D) is consumed (its plain rows are moved
  /// into de when N_in skipped them); du (R, D) is scratch. Accumulates de (R, D), dpre (R, P), the
  /// parameter gradients, and dS (R, D) when non-null (null: the source is detached; dS is overwritten).
  template <class Be>
  void fused_backward(Be& be, const Weights<T>& w, const typename F::Cache& fc, const T* S, const T* e, const T* pre, const T* u, const T* rin,
                      const T* mask, T* dX, T* du, T* dS, T* de, T* dpre, int R) const {
    static_assert(may_feed_back, "FusedInput::fused_backward needs a feedback fuser");
    const std::size_t RD = std::size_t(R) * width;
    // plain rows go to e (through N_in unless it skipped them), fed-back rows through N_in and the fuser
    if (!norm_plain_rows_when_fed()) be.move_plain_rows(de, dX, mask, R, width);
    be.zero(du, RD);
    in_norm.backward(be, w, du, dX, u, rin, R);
    be.move_plain_rows(de, du, mask, R, width);
    if (dS) be.zero(dS, RD);
    fuser.backward(be, w, fc, S, e, pre, du, dS, de, dpre, R);
  }

  /// \brief The input of one decoding step of R sequences: fused_forward with the decoding rule for the
  /// plain rows when any row is fed back (S, mask, pre, fc, u as there), else plain_forward.
  template <class Be>
  void decode_forward(Be& be, const Weights<T>& w, int R, const T* e, bool any_fused, const T* S, const T* mask, const T* pre,
                      typename F::Cache& fc, T* u, T* rin, T* X) const {
    if constexpr (may_feed_back) {
      if (any_fused) return fused_forward(be, w, R, e, S, mask, pre, fc, u, rin, X, false);
    }
    (void)any_fused, (void)S, (void)mask, (void)pre, (void)fc, (void)u;
    plain_forward(be, w, R, e, X, rin);
  }
};

}  // namespace fbt
