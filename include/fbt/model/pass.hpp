// fbt/model/pass.hpp: one pass of the stack, forward and backward, written once over a backend.
//
// A Workspace holds every activation of a step in the backend's memory (one buffer, laid out once per
// shape: a step allocates nothing), with one PassCache per live pass (STYLE 2.4). A PassRunner binds a
// backend, a model, its weights (as that backend sees them) and a workspace, and gives the pass-level
// operations every user of the model shares, in the one order they are called:
//   prepare -> begin_batch -> precompute -> plain_input | fused_input -> stack_forward -> head_forward
//   and backward: pass_backward (last pass first, the carry through shift_right) -> finish_backward
// multipass_step (the K-pass objective), the decoder's prefill, the evaluations and the contraction
// monitor are written on top of it (forward_chain runs a plain pass and k fed-back ones).
// Spec section 3 for the fed-back pass: S = shift_right(source + jitter); X = N_in(Fuse(S, e)) on
// fed-back rows, the plain input elsewhere (position 0, document starts, the plain prefix): the model's
// FusedInput layer (layers/fused_input.hpp), called by plain_input, fused_input and pass_backward.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "model.hpp"

namespace fbt {

/// A callback of the backward: fn(ctx, l) once block l's parameter gradients are final for the step.
struct GradReady {
  void (*fn)(void* ctx, int layer) = nullptr;
  void* ctx = nullptr;
  void operator()(int layer) const {
    if (fn) fn(ctx, layer);
  }
};

/// A batch of B rows of T tokens (host memory). targets[n] < 0 is ignored; doc_start may be null.
struct Batch {
  int B = 0, T = 0;
  const int* tokens = nullptr;             ///< (B*T) input token ids
  const int* targets = nullptr;            ///< (B*T) next-token targets; < 0 = no target
  const std::uint8_t* doc_start = nullptr; ///< (B*T) 1 where a document starts (position 0 always does)
};

/// Per-pass statistics of a step (spec 6).
struct StepStats {
  std::vector<double> loss;      ///< (K) mean CE of each pass (noise-free states feed its loss)
  std::vector<double> weight;    ///< (K) loss weight: 1, then lambda/(K-1)
  double objective = 0.0;        ///< sum_j weight_j loss_j
  long targets = 0;              ///< targets per pass
  std::vector<double> state_rms; ///< (K) rms of the state fed into pass j over fed-back rows (0 for pass 1)
  std::vector<double> gate_mean, gate_std;  ///< (K) the fuser's gate over fed-back rows (gated fusers)
  std::vector<double> feedback_ratio;       ///< (K) ||Fuse - base|| / ||e|| over fed-back rows (additive fusers)
  void reset(int K) {
    objective = 0.0, targets = 0;
    loss.assign(K, 0.0), weight.assign(K, 0.0), state_rms.assign(K, 0.0);
    gate_mean.assign(K, 0.0), gate_std.assign(K, 0.0), feedback_ratio.assign(K, 0.0);
  }
};

/// One pass's activations (the multi-pass objective holds one per live pass). In a forward-only
/// workspace the residual stream alternates between two buffers (res[l] is then valid only until layer
/// l+1 overwrites it, except the tapped layer's output, which keeps its own), but each layer keeps its
/// keys and values for a prefill.
template <class M> struct PassCache {
  using T = typename M::Scalar;
  std::vector<T*> res;                              // L+1 of (N, D): res[0] = X, res[l+1] = block l's output
  std::vector<typename M::Block::Cache> blocks;     // L
  T *hf = nullptr, *rf = nullptr;                   // (N, D), (N)  final-norm output and rstd
  T* dhead = nullptr;                               // (N, D)  d(weighted loss of this pass) / d hf
  T *S = nullptr, *u = nullptr, *rin = nullptr;     // (N, D), (N, D), (N)  shifted state, N_in input, N_in rstd
  T* mask = nullptr;                                // (N)  1 where the row is fed back, 0 where plain
  typename M::Fuser::Cache fuser{};
};

/// Everything a step needs besides the parameters, in backend Be's memory.
template <class M, class Be = CpuBackend<typename M::Scalar>> struct Workspace {
  using T = typename M::Scalar;
  template <class U> using Buf = typename Be::template Buf<U>;
  Buf<T> mem;                                       // every float activation, one allocation
  Buf<int> ints;                                    // tokens, targets, pos, first, first_window: (N) each
  const void* owner = nullptr;                      // the model it was laid out for
  int B = 0, T_ = 0, slots = 0;
  bool grad = false;
  long count = 0;                                   // targets >= 0 in the batch
  std::vector<int> pos_h, first_h, first_w_h;       // (N) host copies of the position tables
  std::vector<std::uint8_t> plain;                  // (N) 1 at a row's position 0 and at document starts
  std::vector<T> mask_h;                            // (N) host copy of the last fed-back pass's mask
  long fed_rows = 0;                                // rows with mask 1 in it
  int *tokens = nullptr, *targets = nullptr, *pos = nullptr, *first = nullptr;  // (N) each
  int* first_window = nullptr;                      // (N) max(first, t - W + 1): the sliding layers' window starts (model's W)
  T *e = nullptr, *de = nullptr;                    // (N, D)  token embeddings and their gradient
  T *pre = nullptr, *dpre = nullptr;                // (N, P)  the fuser's precompute and its gradient (summed over passes)
  typename FuserOps<typename M::Fuser>::PreCache fpre{};
  T *logits = nullptr, *losses = nullptr, *lse = nullptr;  // (N, V), (N), (N)
  std::vector<PassCache<M>> pass;                   // slots
  T *dres = nullptr, *dhf = nullptr, *du = nullptr, *ds = nullptr, *noise = nullptr;  // (N, D) each
  T* carry[2] = {nullptr, nullptr};                 // (N, D)  d source state handed from pass j to pass j-1
  std::size_t elements = 0;                         // of mem in use
  int N() const { return B * T_; }
  std::size_t bytes() const { return elements * sizeof(T) + std::size_t(5) * N() * sizeof(int); }
};

template <class M, class Be = CpuBackend<typename M::Scalar>> class PassRunner {
 public:
  using T = typename M::Scalar;
  using F = typename M::Fuser;
  using Pass = PassCache<M>;
  using WS = Workspace<M, Be>;
  static constexpr bool fb = M::may_feed_back;  // the fed-back code is compiled (m.feedback() says whether it runs)

  /// The jitter of one fed-back pass's carried state (sigma 0: none), drawn per batch row (layers/fused_input.hpp).
  using Jitter = FeedJitter;

  PassRunner(Be& be, const M& m, const Weights<T>& w, WS& ws) : be_(be), m_(m), w_(w), ws_(ws) {}
  Be& backend() { return be_; }
  const M& model() const { return m_; }
  const Weights<T>& weights() const { return w_; }
  WS& workspace() { return ws_; }
  PassShape shape() const { return PassShape{ws_.B, ws_.T_, ws_.pos, ws_.first, m_.window, m_.window > 0 ? ws_.first_window : nullptr}; }

  /// Bytes a workspace for (B, T, slots, grad) needs: what a step will use, known before it runs.
  static std::size_t workspace_bytes(const Be& be, const M& m, int B, int Tn, int slots, bool grad) {
    WS w;
    return measure_regions<T>([&](Regions<T>& r) { layout(be, m, r, w, B, Tn, slots, grad); }) * sizeof(T) + std::size_t(5) * B * Tn * sizeof(int);
  }

  /// \brief Lays the workspace out if its shape changed (the only allocation; a step allocates nothing).
  void prepare(int B, int Tn, int slots, bool grad) {
    FBT_ASSERT(B > 0 && Tn > 0, "batch shape must be positive, got B=" + std::to_string(B) + " T=" + std::to_string(Tn));
    FBT_ASSERT(Tn <= m_.opts.max_position_embeddings, "sequence length T=" + std::to_string(Tn) + " exceeds max_position_embeddings=" +
                                                           std::to_string(m_.opts.max_position_embeddings));
    WS& w = ws_;
    if (w.owner == &m_ && w.B == B && w.T_ == Tn && w.slots == slots && w.grad == grad) return;
    w.elements = lay_out_regions<T>(w.mem, [&](Regions<T>& r) { layout(be_, m_, r, w, B, Tn, slots, grad); });
    const std::size_t N = std::size_t(B) * Tn;
    if (w.ints.size() < 5 * N) w.ints.resize(5 * N);
    w.tokens = w.ints.data(), w.targets = w.tokens + N, w.pos = w.targets + N, w.first = w.pos + N, w.first_window = w.first + N;
    w.pos_h.assign(N, 0), w.first_h.assign(N, 0), w.first_w_h.assign(N, 0), w.plain.assign(N, 0), w.mask_h.assign(N, T(0));
    w.owner = &m_, w.B = B, w.T_ = Tn, w.slots = slots, w.grad = grad;
  }

  /// \brief Tokens (N), document starts (N, may be null: each row is one document) and targets (N, may be
  /// be null: forward only), all host memory, into the workspace; embeds the tokens into ws.e. Under
  /// doc_attention "masked", RoPE positions restart at each document and attention stays inside it
  /// (spec invariant 6).
  void begin_batch(const int* tokens, const std::uint8_t* doc_start, const int* targets) {
    WS& w = ws_;
    const int B = w.B, Tn = w.T_, N = w.N(), V = m_.V;
    const bool masked = m_.opts.doc_masked;
    for (int b = 0; b < B; ++b) {
      int start = 0;
      for (int t = 0; t < Tn; ++t) {
        const std::size_t n = std::size_t(b) * Tn + t;
        const bool is_start = t == 0 || (doc_start && doc_start[n]);
        if (is_start) start = t;
        w.plain[n] = is_start;
        w.pos_h[n] = masked ? t - start : t;
        w.first_h[n] = masked ? start : 0;
        w.first_w_h[n] = m_.window > 0 ? std::max(w.first_h[n], t - m_.window + 1) : w.first_h[n];  // non-decreasing, as first
      }
    }
    for (int n = 0; n < N; ++n)
      FBT_ASSERT(tokens[n] >= 0 && tokens[n] < V, "token id " + std::to_string(tokens[n]) + " at position " + std::to_string(n) +
                                                      " is outside the vocabulary [0, " + std::to_string(V) + ")");
    w.count = 0;
    if (targets) {
      for (int n = 0; n < N; ++n) {
        FBT_ASSERT(targets[n] < V, "target " + std::to_string(targets[n]) + " at position " + std::to_string(n) + " is outside the vocabulary of " +
                                       std::to_string(V));
        w.count += targets[n] >= 0;
      }
      be_.upload(w.targets, targets, std::size_t(N));
    }
    be_.upload(w.tokens, tokens, std::size_t(N));
    be_.upload(w.pos, w.pos_h.data(), std::size_t(N));
    be_.upload(w.first, w.first_h.data(), std::size_t(N));
    if (m_.window > 0) be_.upload(w.first_window, w.first_w_h.data(), std::size_t(N));
    m_.embed.forward(be_, w_, w.e, w.tokens, N);
  }

  /// \brief The fuser's e-only precompute, once per step (shared by every fed-back pass); clears its gradient.
  void precompute() {
    if constexpr (fb) {
      WS& w = ws_;
      if (!m_.feedback()) return;
      const int N = w.N(), P = FuserOps<F>::pre_width(m_.fuser());
      if (P == 0) return;
      FuserOps<F>::pre_forward(m_.fuser(), be_, w_, w.fpre, w.e, w.pre, N);
      if (w.dpre) be_.zero(w.dpre, std::size_t(N) * P);
    }
  }

  /// \brief Layer-0 input of a plain pass into p.res[0].
  void plain_input(Pass& p) { m_.input().plain_forward(be_, w_, ws_.N(), ws_.e, p.res[0], p.rin); }

  /// \brief Layer-0 input of a fed-back pass into p.res[0], from the previous pass's source state `src`
  /// (N, D) (plus the jitter, if any) and the plain-row rule: row (b, t) is fed back iff t >= max(prefix_b, 1)
  /// and t is not a document start. prefix (B, host) may be null (= 0). Requires precompute().
  void fused_input(Pass& p, const T* src, const Jitter* jit, const int* prefix) {
    static_assert(fb, "fused_input needs a feedback fuser");
    WS& w = ws_;
    const int N = w.N();
    const auto& in = m_.input();
    in.source_forward(be_, p.S, w.noise, src, jit, w.B, w.T_);
    w.fed_rows = in.fed_mask(w.mask_h.data(), w.plain.data(), prefix, w.B, w.T_);
    be_.upload(p.mask, w.mask_h.data(), std::size_t(N));
    in.fused_forward(be_, w_, N, w.e, p.S, p.mask, w.pre, p.fuser, p.u, p.rin, p.res[0]);
  }

  /// \brief Runs the stack and the final norm on p.res[0]: fills p.res[1..L], p.hf.
  void stack_forward(Pass& p) {
    const PassShape s = shape();
    for (int l = 0; l < m_.L; ++l) m_.blocks[l].forward(be_, w_, p.blocks[l], p.res[l], p.res[l + 1], s);
    m_.final_norm.forward(be_, w_, p.hf, p.rf, p.res[m_.L], s.N());
  }
  /// The state this pass feeds to the next (the tap: the final norm's output or a block's).
  const T* source(const Pass& p) const { return m_.opts.tap.is_final_norm() ? p.hf : p.res[m_.opts.tap.layer + 1]; }

  /// \brief logits = hf W_head^T into ws.logits, CE into ws.losses. Returns (sum of losses, number of
  /// targets). With weight > 0 also writes p.dhead = d(weight * mean CE)/d hf and accumulates the head's
  /// gradient. Needs the targets given to begin_batch.
  std::pair<double, long> head_forward(Pass& p, double weight) {
    WS& w = ws_;
    const int N = w.N(), D = m_.D, V = m_.V;
    const std::size_t head = m_.head_offset();
    linear(be_, w.logits, p.hf, w_.value + head, N, V, D, D, false);
    const double sum = be_.softmax_xent_forward(w.logits, w.losses, w.lse, w.targets, N, V, m_.opts.z_loss);
    if (weight > 0 && w.count > 0) {
      be_.softmax_xent_backward(w.logits, w.lse, w.targets, N, V, weight / double(w.count), m_.opts.z_loss);
      be_.zero(p.dhead, std::size_t(N) * D);
      linear_backward(be_, p.dhead, w_.grad + head, w.logits, p.hf, w_.value + head, N, V, D, D);
    } else if (weight > 0) {
      be_.zero(p.dhead, std::size_t(N) * D);
    }
    return {sum, w.count};
  }

  /// \brief The state's rms and the fuser's own diagnostics for the fed-back pass just assembled.
  void diagnostics(const Pass& p, StepStats& st, int j) {
    if constexpr (fb) {
      WS& w = ws_;
      if (!m_.feedback() || w.fed_rows == 0) return;
      const int N = w.N(), D = m_.D;
      st.state_rms[j] = std::sqrt(be_.masked_sumsq(p.S, p.mask, N, D) / (double(w.fed_rows) * D));
      const FuserStats fs = FuserOps<F>::diagnostics(m_.fuser(), be_, w_, p.fuser, FuserPass<T>{p.S, w.e, w.pre, p.u, p.mask, N, w.fed_rows});
      st.gate_mean[j] = fs.gate_mean, st.gate_std[j] = fs.gate_std, st.feedback_ratio[j] = fs.feedback_ratio;
    }
  }

  /// \brief Backward of one pass. On entry p.dhead holds this pass's loss gradient; carry_in (N, D) (or
  /// null) is d(later passes)/d(this pass's source state), injected at the tap. Accumulates ws.de,
  /// ws.dpre and the parameter gradients; writes carry_out (N, D) = d/d(previous pass's source state)
  /// when non-null. ready (or null): called with l after block l's backward (the last pass's backward).
  void pass_backward(Pass& p, bool fed_back, const T* carry_in, T* carry_out, const GradReady* ready = nullptr) {
    WS& w = ws_;
    const int N = w.N(), D = m_.D, L = m_.L;
    const std::size_t ND = std::size_t(N) * D;
    const PassShape s = shape();
    const FeedbackTap tap = m_.opts.tap;
    be_.copy(w.dhf, p.dhead, ND);
    if (carry_in && tap.is_final_norm()) be_.add(w.dhf, carry_in, ND);
    be_.zero(w.dres, ND);
    m_.final_norm.backward(be_, w_, w.dres, w.dhf, p.res[L], p.rf, N);
    for (int l = L - 1; l >= 0; --l) {
      if (carry_in && tap.layer == l) be_.add(w.dres, carry_in, ND);  // the carry enters at the tapped block's output
      m_.blocks[l].backward(be_, w_, p.blocks[l], w.dres, p.res[l], s);
      if (ready) (*ready)(l);
    }
    // w.dres = dX, the gradient w.r.t. the layer-0 input
    if constexpr (fb) {
      if (fed_back) {  // through N_in and the fuser, then shift_right's transpose into the previous pass's source
        m_.input().fused_backward(be_, w_, p.fuser, p.S, w.e, w.pre, p.u, p.rin, p.mask, w.dres, w.du, carry_out ? w.ds : nullptr, w.de, w.dpre, N);
        if (carry_out) {
          be_.zero(carry_out, ND);
          m_.input().source_backward(be_, carry_out, w.ds, w.B, w.T_);
        }
        return;
      }
    }
    m_.input().plain_backward(be_, w_, w.de, w.dres, w.e, p.rin, N);  // a plain pass: X = N_in(e) or e
  }

  /// \brief Last step of backward: the precompute's gradient (summed over passes) and the embedding scatter.
  void finish_backward(bool any_fed_back) {
    WS& w = ws_;
    const int N = w.N();
    if constexpr (fb) {
      if (any_fed_back) FuserOps<F>::pre_backward(m_.fuser(), be_, w_, w.fpre, w.e, w.dpre, w.de, N);
    }
    m_.embed.backward(be_, w_, w.de, w.tokens, N);
  }

  /// \brief A plain pass and then passes-1 fed-back passes in slot 0 (no jitter; position 0 and document starts
  /// plain, and with `prefix` (B, host; null = none) positions t < prefix[b] of row b in every fed-back pass),
  /// calling on_pass(j, pass) after each pass's stack. The batch must be begun.
  template <class Fn> void forward_chain(int passes, Fn&& on_pass, const int* prefix = nullptr) {
    FBT_ASSERT(passes >= 1, "forward_chain: passes must be >= 1");
    FBT_ASSERT(passes == 1 || m_.feedback(), "forward_chain: " + std::to_string(passes) + " passes need a feedback fuser (the model's fuser is none)");
    Pass& p = ws_.pass[0];
    if constexpr (fb) {
      if (passes > 1) precompute();
    }
    for (int j = 0; j < passes; ++j) {
      if (j == 0) plain_input(p);
      else if constexpr (fb) fused_input(p, source(p), nullptr, prefix);
      stack_forward(p);
      on_pass(j, p);
    }
  }

 private:
  /// The arena layout of a workspace (run twice by lay_out_regions: count, then point).
  static void layout(const Be& be, const M& m, Regions<T>& r, WS& w, int B, int Tn, int slots, bool grad) {
    const int D = m.D, V = m.V, L = m.L;
    const std::size_t N = std::size_t(B) * Tn, ND = N * D;
    Carver<T>& a = r.keep;
    w.e = a.take(ND), w.de = grad ? a.take(ND) : nullptr;
    w.pre = w.dpre = nullptr;
    if constexpr (fb) {
      const int P = m.feedback() ? FuserOps<F>::pre_width(m.fuser()) : 0;
      if (P > 0) {
        w.pre = a.take(N * P), w.dpre = grad ? a.take(N * P) : nullptr;
        Carver<T> t = r.temp();
        FuserOps<F>::alloc_pre(m.fuser(), be, a, t, w.fpre, int(N), grad);
        r.done(t);
      }
    }
    w.logits = a.take(N * V), w.losses = a.take(N), w.lse = a.take(N);
    w.pass.assign(slots, Pass{});
    const int tap_res = m.opts.tap.is_final_norm() ? -1 : m.opts.tap.layer + 1;  // the residual the tap reads
    for (auto& p : w.pass) {
      p.res.assign(L + 1, nullptr);
      p.blocks.assign(L, typename M::Block::Cache{});
      if (grad) {  // backward reads every layer's input
        for (auto& x : p.res) x = a.take(ND);
      } else {     // forward only: two buffers in turn, and the tapped output its own (the next pass reads it)
        T* rb[2] = {a.take(ND), a.take(ND)};
        for (int l = 0; l <= L; ++l) p.res[l] = rb[l % 2];
        if (tap_res >= 0) p.res[tap_res] = a.take(ND);
      }
      for (int l = 0; l < L; ++l) {
        Carver<T> t = r.temp();
        m.blocks[l].alloc(be, a, t, p.blocks[l], B, Tn, grad);
        r.done(t);
      }
      p.hf = a.take(ND), p.rf = a.take(N), p.dhead = grad ? a.take(ND) : nullptr;
      p.S = p.u = p.mask = nullptr;
      p.rin = a.take(N);  // N_in's rstd (plain inputs under input_norm all, and fused ones)
      if constexpr (fb) {
        if (m.feedback()) {
          p.S = a.take(ND), p.u = a.take(ND), p.mask = a.take(N);
          Carver<T> t = r.temp();
          m.fuser().alloc(be, a, t, p.fuser, int(N), grad);
          r.done(t);
        }
      }
    }
    w.noise = fb && m.feedback() ? a.take(ND) : nullptr;
    w.dres = w.dhf = w.du = w.ds = nullptr;
    w.carry[0] = w.carry[1] = nullptr;
    if (grad) {
      w.dres = a.take(ND), w.dhf = a.take(ND);
      if (fb && m.feedback()) w.du = a.take(ND), w.ds = a.take(ND), w.carry[0] = a.take(ND), w.carry[1] = a.take(ND);
    }
  }

  Be& be_;
  const M& m_;
  Weights<T> w_;
  WS& ws_;
};

}  // namespace fbt
