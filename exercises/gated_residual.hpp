// exercises/gated_residual.hpp: EXERCISE E5, write your own fuser (docs/course/04-fuser-lab.md):
// the gated residual fuser, fuser "gated_residual",
//
//     u = e + sigmoid(W_g [s; e]) * (W_s s)        W_g (D, 2D), W_s (D, D), * elementwise
//
// s (N, D) is the previous position's fed-back state, e (N, D) the token's embedding, [s; e] (N, 2D)
// their concatenation per row, so W_g's left half (its first D columns) acts on s and its right half on e.
// Parameters and init (names under model.feedback.):
//     w_g.weight  (D, 2D)   normal, std = FuserArgs::initializer_range     (fbt::Init::Normal)
//     w_s.weight  (D, D)    zeros: the model starts as the plain one        (fbt::Init::Zeros)
//
// Your task: write declare, alloc, forward and backward below, following the contract of
// include/fbt/layers/fuser.hpp (and examples/custom_fuser.cpp, a fuser written the same way). Derive the
// backward yourself: which gradients flow into s, into e, into W_g, into W_s? Then build and run your check:
//     cmake --build build --target exercise_gated_residual_student
//     build/exercises/check_gated_residual_student
// It checks your forward against the formula, every gradient against central finite differences, the
// whole K-pass step of a tiny Model<double, GatedResidualFuser<double>>, and a checkpoint round trip.
// Stuck? exercises/hints/gated_residual.md has three graded hints; the checker tells you which to read.
#pragma once

// The shipped stub: the checker reads this as "not attempted yet" (exit 77, ctest: skipped). Delete the
// line when you start.
#define FBT_EXERCISE_UNSOLVED

#include <cmath>
#include <cstddef>

#include "fbt/layers/fuser.hpp"  // FuserArgs, ParamRegistry, Carver, Weights, fbt::linear, fbt::linear_backward

namespace fbt_course {

template <class T> struct GatedResidualFuser {
  using Scalar = T;
  static constexpr const char* name = "gated_residual";  // the config's `fuser` value
  int D = 0;
  double init_std = 0.02;
  std::size_t w_g = 0, w_s = 0;  // offsets of W_g (D, 2D) and W_s (D, D) in the flat parameter store

  /// What one pass keeps for its backward, and the backward's scratch.
  /// TODO (exercise E5): choose its members. Each is a pointer to a slice that alloc takes: from keep what
  /// forward computes and backward reads (it must live from one pass's forward to its backward), from temp
  /// what backward needs only while it runs. Which intermediate results does your backward need?
  struct Cache {};

  GatedResidualFuser() = default;
  explicit GatedResidualFuser(const fbt::FuserArgs& args) : D(args.hidden_size), init_std(args.initializer_range) {}

  /// TODO (exercise E5): declare w_g.weight (D, 2D) and w_s.weight (D, D) with their init (see the top),
  /// keeping their offsets in w_g and w_s (r.add returns the offset).
  void declare(const fbt::ParamRegistry<T>& r) { (void)r; }

  /// TODO (exercise E5): take the Cache's slices: from keep what backward reads, from temp (only when grad)
  /// backward's scratch. Each slice is keep.take(n) or temp.take(n), n = N * D.
  template <class Be> void alloc(const Be&, fbt::Carver<T>& keep, fbt::Carver<T>& temp, Cache& c, int N, bool grad) const {
    (void)keep, (void)temp, (void)c, (void)N, (void)grad;
  }

  /// TODO (exercise E5): u (N, D) = e + sigmoid(W_g [s; e]) * (W_s s), overwriting u; keep in c what
  /// backward needs. w.value + w_g is W_g (row stride 2D); fbt::linear (layers/common.hpp) multiplies by a
  /// matrix or by one half of it. pre is null (this fuser has no precompute).
  template <class Be>
  void forward(Be& be, const fbt::Weights<T>& w, Cache& c, const T* s, const T* e, const T* pre, T* u, int N) const {
    (void)be, (void)w, (void)c, (void)s, (void)pre;
    for (std::size_t i = 0; i < std::size_t(N) * D; ++i) u[i] = e[i];  // replace: this is u = e, no feedback
  }

  /// TODO (exercise E5): given du (N, D) = dLoss/du, ACCUMULATE (+=)
  ///   ds (N, D)                 (skip it when ds is null: the pass is detached)
  ///   de (N, D)
  ///   w.grad + w_g   (D, 2D)    dLoss/dW_g
  ///   w.grad + w_s   (D, D)     dLoss/dW_s
  /// fbt::linear_backward (layers/common.hpp) does both gradients of a linear map; it skips a null one (a null
  /// T*: a literal nullptr does not deduce T, write static_cast<T*>(nullptr)).
  template <class Be>
  void backward(Be& be, const fbt::Weights<T>& w, const Cache& c, const T* s, const T* e, const T* pre, const T* du, T* ds, T* de,
                T* dpre, int N) const {
    (void)be, (void)w, (void)c, (void)s, (void)e, (void)pre, (void)du, (void)ds, (void)de, (void)dpre, (void)N;
  }
};

}  // namespace fbt_course
