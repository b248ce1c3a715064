// fbt/model/multipass.hpp: the scheduled multi-pass objective, one step (spec section 3).
//
//   pass 1:   X1 = N_in(e);  H1 = Stack(X1);  loss = CE(H1, y)
//   pass j:   S = shift_right(H_{j-1} + U(-sigma, sigma));  Xj = N_in(Fuse(S, e)) where fed back, X1 where plain;
//             Hj = Stack(Xj);  loss += lambda / (K-1) * CE(Hj, y)
// Backward (no detach, the default) runs j = K..1 and hands d S back through shift_right:
//   dH_{j-1}[:, t] += dS_j[:, t+1]
// so the loss of pass j reaches every earlier pass. E collects the gradients of every pass's embedding
// use, of the fuser's gate and of the tied head.
// Knobs: detach (stop-gradient between passes: each pass is run forward then backward at once, memory
// of one pass), grad_passes = g (passes 1..K-g run forward-only: their losses are reported, they give
// no gradient), lambda, sigma (jitter, from the caller's seeded Rng), prefix (B per pass: plain
// positions), document starts (plain positions; no state crosses a boundary).
#pragma once

#include <cmath>
#include <vector>

#include "model.hpp"

namespace fbt {

/// A batch of B rows of T tokens. targets[n] < 0 is ignored; doc_start may be null.
struct Batch {
  int B = 0, T = 0;
  const int* tokens = nullptr;             ///< (B*T) input token ids
  const int* targets = nullptr;            ///< (B*T) next-token targets; < 0 = no target
  const std::uint8_t* doc_start = nullptr; ///< (B*T) 1 where a document starts (position 0 always does)
};

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
};

struct StepStats {
  std::vector<double> loss;      ///< (K) mean CE of each pass (noise-free states feed its loss)
  std::vector<double> weight;    ///< (K) loss weight: 1, then lambda/(K-1)
  double objective = 0.0;        ///< sum_j weight_j loss_j
  long targets = 0;              ///< targets per pass
  std::vector<double> state_rms; ///< (K) rms of the state fed into pass j over fed-back rows (0 for pass 1)
  std::vector<double> gate_mean, gate_std;  ///< (K) glu: sigmoid gate over fed-back rows
  std::vector<double> feedback_ratio;       ///< (K) ||Fuse - base|| / ||e|| over fed-back rows (gated_add, concat)
};

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

/// Diagnostics of a fed-back pass (spec 6): rms of the fed-back state, glu gate mean/std, feedback ratio.
template <class T> void diagnostics(const Model<T>& m, const Workspace<T>& w, const PassCache<T>& p, StepStats& st, int j) {
  const int N = w.N(), D = m.D;
  double ss = 0, gs = 0, gss = 0, num = 0, den = 0;
  long rows = 0;
  for (int n = 0; n < N; ++n) {
    if (p.mask[n] == T(0)) continue;
    ++rows;
    auto s = cmat(p.S, N, D).row(n);
    ss += double(s.squaredNorm());
    if (m.fuser.kind == FuserKind::Glu) {
      for (int c = 0; c < D; ++c) {
        const double g = 1.0 / (1.0 + std::exp(-double(w.fshared.pe[std::size_t(n) * D + c])));
        gs += g, gss += g * g;
      }
    } else {
      const auto e = cmat(w.e, N, D).row(n);
      const auto u = cmat(p.u, N, D).row(n);
      den += double(e.squaredNorm());
      if (m.fuser.kind == FuserKind::GatedAdd) num += double((u - e).squaredNorm());
      else num += double((u - cmat(w.fshared.pe, N, D).row(n)).squaredNorm());
    }
  }
  if (rows == 0) return;
  st.state_rms[j] = std::sqrt(ss / (double(rows) * D));
  if (m.fuser.kind == FuserKind::Glu) {
    const double cnt = double(rows) * D, mean = gs / cnt;
    st.gate_mean[j] = mean, st.gate_std[j] = std::sqrt(std::max(0.0, gss / cnt - mean * mean));
  } else if (den > 0) {
    st.feedback_ratio[j] = std::sqrt(num / den);
  }
}

/// Bytes the workspace of such a step needs (known before it runs; memory without detach ~ K passes).
template <class T> std::size_t step_workspace_bytes(const Model<T>& m, int B, int Tn, const StepOptions& o) {
  return m.workspace_bytes(B, Tn, detail::step_slots(o), o.backward);
}

template <class T> void validate_step(const Model<T>& m, const Batch& b, const StepOptions& o) {
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

/// \brief One K-pass step: forward, and (if o.backward) backward with every gradient ACCUMULATED into
/// m.params' grads (call zero_grad first). Fills st (its vectors are reused: a repeated step of the same
/// shape allocates nothing). Throws fbt::Error on a non-finite loss, naming the pass.
template <class T> void multipass_step(Model<T>& m, Workspace<T>& w, const Batch& b, const StepOptions& o, StepStats& st) {
  validate_step(m, b, o);
  const int K = o.K, N = b.B * b.T, D = m.D;
  const int fg = o.backward ? detail::first_grad_pass(o) : K;  // first pass that gives gradient
  m.prepare(w, b.B, b.T, detail::step_slots(o), o.backward);
  m.begin_batch(w, b.tokens, b.doc_start);
  if (K > 1) m.fuser.shared_forward(m.params, w.fshared, w.e, N);
  if (o.backward) zero(w.de, std::size_t(N) * D);

  st.objective = 0.0;
  st.loss.assign(K, 0.0), st.weight.assign(K, 0.0), st.state_rms.assign(K, 0.0);
  st.gate_mean.assign(K, 0.0), st.gate_std.assign(K, 0.0), st.feedback_ratio.assign(K, 0.0);
  auto slot_of = [&](int j) -> PassCache<T>& {
    if (j < fg || o.detach) return w.pass[0];
    return w.pass[j - fg];
  };

  auto run_forward = [&](int j) {
    PassCache<T>& p = slot_of(j);
    const bool grad = j >= fg;
    if (j == 0) {
      m.plain_input(w, p);
    } else {
      const T* src = m.source_state(slot_of(j - 1));
      const T* noise = nullptr;
      if (o.sigma > 0) {  // draw the jitter into a buffer that is free during forward
        // one seed per pass from the caller's Rng, then one stream per batch row (by its global index), so
        // a batch split across threads draws exactly the noise the whole batch would
        const std::uint64_t seed = (std::uint64_t(o.rng->next_u32()) << 32) | o.rng->next_u32();
        T* nz = w.dres ? w.dres : w.noise;
        const std::size_t row = std::size_t(b.T) * D;
        for (int r = 0; r < b.B; ++r) {
          SplitMix64 rr(seed ^ (0xD1B54A32D192ED03ull * std::uint64_t(o.row_offset + r + 1)));
          for (std::size_t i = 0; i < row; ++i) nz[r * row + i] = T(rr.uniform(-o.sigma, o.sigma));
        }
        noise = nz;
      }
      m.fused_input(w, p, src, noise, o.prefix ? o.prefix + std::size_t(j) * b.B : nullptr);
      diagnostics(m, w, p, st, j);
    }
    m.stack_forward(w, p);
    st.weight[j] = j == 0 ? 1.0 : o.lambda / (K - 1);
    const auto [sum, count] = m.head_forward(w, p, b.targets, grad ? st.weight[j] * o.grad_scale : 0.0);
    st.targets = count;
    st.loss[j] = count > 0 ? sum / double(count) : 0.0;
    if (!std::isfinite(st.loss[j])) throw Error("non-finite loss (" + std::to_string(st.loss[j]) + ") in pass " + std::to_string(j + 1) + " of " + std::to_string(K));
    st.objective += st.weight[j] * st.loss[j];
  };

  if (o.detach) {  // each pass: forward, then its own backward; nothing flows between passes
    for (int j = 0; j < K; ++j) {
      run_forward(j);
      if (j >= fg) m.pass_backward(w, slot_of(j), j > 0, nullptr, nullptr);
    }
  } else {
    for (int j = 0; j < K; ++j) run_forward(j);
    const T* carry_in = nullptr;
    for (int j = K - 1; j >= fg; --j) {
      T* carry_out = (j > fg) ? w.carry[j % 2] : nullptr;
      m.pass_backward(w, slot_of(j), j > 0, carry_in, carry_out);
      carry_in = carry_out;
    }
  }
  if (o.backward && fg < K) m.finish_backward(w, b.tokens, K > 1);
}

/// \brief As above, returning the statistics.
template <class T> StepStats multipass_step(Model<T>& m, Workspace<T>& w, const Batch& b, const StepOptions& o) {
  StepStats st;
  multipass_step(m, w, b, o, st);
  return st;
}

}  // namespace fbt
