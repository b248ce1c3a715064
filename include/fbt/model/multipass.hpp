// fbt/model/multipass.hpp: the scheduled multi-pass objective, one step (spec section 3), written once
// over a backend.
//
//   pass 1:   X1 = N_in(e);  H1 = Stack(X1);  loss = CE(H1, y)
//   pass j:   S = shift_right(H_{j-1} + U(-sigma, sigma));  Xj = N_in(Fuse(S, e)) where fed back, X1 where plain;
//             Hj = Stack(Xj);  loss += lambda / (K-1) * CE(Hj, y)
// Backward (no detach, the default) runs j = K..1 and hands d S back through shift_right:
//   dH_{j-1}[:, t] += dS_j[:, t+1]
// so the loss of pass j reaches every earlier pass (H is the tapped state: the final norm's output or a
// block's). E collects the gradients of every pass's embedding use, of the fuser's precompute and of
// the tied head.
// Knobs: detach (stop-gradient between passes: each pass is run forward then backward at once, memory
// of one pass), grad_passes = g (passes 1..K-g run forward-only: their losses are reported, they give
// no gradient), lambda, sigma (jitter, from the caller's seeded Rng), prefix (B per pass: plain
// positions), document starts (plain positions; no state crosses a boundary).
// multipass_step(be, m, w, ws, ...) runs on any backend; multipass_step(m, ws, ...) is the CPU's.
#pragma once

#include <cmath>
#include <vector>

#include "../backend/contract.hpp"
#include "pass.hpp"

namespace fbt {

struct StepOptions {
  int K = 1;                  ///< number of passes (1 = ordinary teacher forcing)
  double lambda = 1.0;        ///< weight of the fed-back passes' mean loss
  double sigma = 0.0;         ///< jitter of the carried state (training only)
  bool detach = false;        ///< stop-gradient between passes
  int grad_passes = 0;        ///< g: only the last g passes give gradient (0 = all K)
  const int* prefix = nullptr;///< (K, B) plain-prefix length per pass and sequence (row 0 unused); null = 0
  Rng* rng = nullptr;         ///< jitter source (required when sigma > 0)
  bool backward = true;       ///< false: forward only (evaluation)
  double grad_scale = 1.0;    ///< multiplies every gradient (1/micro-batches under gradient accumulation)
  int row_offset = 0;         ///< index of the batch's first row in a larger batch (a thread's share): jitter streams are per row
  /// Called in the last backward pass right after block l's backward (l = L-1 down to 0), when block l's
  /// gradients are final for this step: lets a caller reduce them while the backward goes on
  /// (dist/distributed_step.hpp). The other gradients (embedding, norms, fuser, head) are final on return.
  /// On an asynchronous backend (CUDA) the call means block l's backward has been enqueued, not finished.
  GradReady grad_ready;
};

/// \brief Advances rng by exactly the draws multipass_step makes from o.rng for one batch of K passes: one jitter seed
/// (two 32-bit draws) per fed-back pass when sigma > 0, none otherwise. A run's plan (train/run_plan.hpp) calls it to
/// stay in step with the trainer without running the model; tests/train/test_run_plan.cpp checks the two agree.
inline void skip_step_draws(Rng& rng, int K, double sigma) {
  if (sigma > 0)
    for (int j = 1; j < K; ++j) rng.next_u32(), rng.next_u32();
}

namespace detail {
inline int first_grad_pass(const StepOptions& o) {
  const int g = o.grad_passes <= 0 ? o.K : std::min(o.grad_passes, o.K);
  return o.K - g;
}
inline int step_slots(const StepOptions& o) {
  if (!o.backward || o.detach) return 1;
  return std::max(1, o.K - first_grad_pass(o));
}
}  // namespace detail

/// Bytes the workspace of such a step needs on backend Be (known before it runs; memory without detach ~ K passes).
template <class M, class Be = CpuBackend<typename M::Scalar>>
std::size_t step_workspace_bytes(const M& m, int B, int Tn, const StepOptions& o, const Be& be = Be{}) {
  return PassRunner<M, Be>::workspace_bytes(be, m, B, Tn, detail::step_slots(o), o.backward);
}

template <class M> void validate_step(const M& m, const Batch& b, const StepOptions& o) {
  FBT_ASSERT(b.tokens && b.targets, "Batch needs tokens and targets");
  FBT_ASSERT(o.K >= 1, "StepOptions.K must be >= 1, got " + std::to_string(o.K));
  FBT_ASSERT(o.K == 1 || m.feedback(), "StepOptions.K = " + std::to_string(o.K) + " needs a feedback fuser (the model's fuser is none)");
  FBT_ASSERT(o.sigma >= 0, "StepOptions.sigma must be >= 0");
  FBT_ASSERT(o.sigma == 0 || o.rng, "StepOptions.sigma > 0 needs an Rng");
  FBT_ASSERT(o.grad_passes >= 0, "StepOptions.grad_passes must be >= 0");
  if (o.prefix)
    for (int j = 1; j < o.K; ++j)
      for (int i = 0; i < b.B; ++i)
        FBT_ASSERT(o.prefix[j * b.B + i] >= 0 && o.prefix[j * b.B + i] <= b.T,
                   "prefix of pass " + std::to_string(j + 1) + ", sequence " + std::to_string(i) + " must be in [0, T]");
}

/// \brief One K-pass step on backend `be`: forward, and (if o.backward) backward with every gradient
/// ACCUMULATED into w.grad (zero them first). Fills st (its vectors are reused: a repeated step of the
/// same shape allocates nothing). Throws fbt::Error on a non-finite loss, naming the pass.
template <class M, class Be>
void multipass_step(Be& be, const M& m, const Weights<typename M::Scalar>& w, Workspace<M, Be>& ws, const Batch& b, const StepOptions& o,
                    StepStats& st) {
  static_assert(check_backend<Be>(), "multipass_step: Be is not a backend (backend/contract.hpp)");
  using T = typename M::Scalar;
  using Pass = PassCache<M>;
  validate_step(m, b, o);
  const int K = o.K, N = b.B * b.T, D = m.D;
  const int fg = o.backward ? detail::first_grad_pass(o) : K;  // first pass that gives gradient
  // bf16 products read one bf16 copy of each weight, made at its first use in this step (ops/bf16_weights.hpp)
  Bf16WeightScope<T> packed(w.value, m.params.size(), /*fresh=*/true);
  PassRunner<M, Be> run(be, m, w, ws);
  run.prepare(b.B, b.T, detail::step_slots(o), o.backward);
  run.begin_batch(b.tokens, b.doc_start, b.targets);
  if (K > 1) run.precompute();
  if (o.backward) be.zero(ws.de, std::size_t(N) * D);
  st.reset(K);
  auto slot_of = [&](int j) -> Pass& {
    if (j < fg || o.detach) return ws.pass[0];
    return ws.pass[j - fg];
  };

  auto run_forward = [&](int j) {
    Pass& p = slot_of(j);
    if (j == 0) {
      run.plain_input(p);
    } else if constexpr (M::may_feed_back) {
      typename PassRunner<M, Be>::Jitter jit;
      if (o.sigma > 0) {  // one seed per pass from the caller's Rng; one stream per batch row (by its global index)
        jit.seed = (std::uint64_t(o.rng->next_u32()) << 32) | o.rng->next_u32();
        jit.sigma = o.sigma, jit.row_offset = o.row_offset;
      }
      run.fused_input(p, run.source(slot_of(j - 1)), &jit, o.prefix ? o.prefix + std::size_t(j) * b.B : nullptr);
      run.diagnostics(p, st, j);
    }
    run.stack_forward(p);
    st.weight[j] = j == 0 ? 1.0 : o.lambda / (K - 1);
    const auto [sum, count] = run.head_forward(p, j >= fg ? st.weight[j] * o.grad_scale : 0.0);
    st.targets = count;
    st.loss[j] = count > 0 ? sum / double(count) : 0.0;
    if (!std::isfinite(st.loss[j])) throw Error("non-finite loss (" + std::to_string(st.loss[j]) + ") in pass " + std::to_string(j + 1) + " of " + std::to_string(K));
    st.objective += st.weight[j] * st.loss[j];
  };

  if (o.detach) {  // each pass: forward, then its own backward; nothing flows between passes
    for (int j = 0; j < K; ++j) {
      run_forward(j);
      if (j >= fg) run.pass_backward(slot_of(j), j > 0, nullptr, nullptr, j == K - 1 ? &o.grad_ready : nullptr);
    }
  } else {
    for (int j = 0; j < K; ++j) run_forward(j);
    const T* carry_in = nullptr;
    for (int j = K - 1; j >= fg; --j) {
      T* carry_out = (j > fg) ? ws.carry[j % 2] : nullptr;
      run.pass_backward(slot_of(j), j > 0, carry_in, carry_out, j == fg ? &o.grad_ready : nullptr);  // pass fg finishes every block's gradients
      carry_in = carry_out;
    }
  }
  if (o.backward && fg < K) run.finish_backward(K > 1);
}

/// \brief The step on the CPU, with the model's own parameters (gradients ACCUMULATED into m.params).
template <class M> void multipass_step(M& m, Workspace<M>& ws, const Batch& b, const StepOptions& o, StepStats& st) {
  CpuBackend<typename M::Scalar> be;
  multipass_step(be, m, m.weights(), ws, b, o, st);
}
/// \brief As above, returning the statistics.
template <class M> StepStats multipass_step(M& m, Workspace<M>& ws, const Batch& b, const StepOptions& o) {
  StepStats st;
  multipass_step(m, ws, b, o, st);
  return st;
}

}  // namespace fbt
