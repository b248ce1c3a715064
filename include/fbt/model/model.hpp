// fbt/model/model.hpp: the full-bandwidth transformer: parameters, layers, and one pass of the stack.
//
// Spec sections 1-2. The stack takes layer-0 input vectors X (N, D), not token ids:
//   baseline (fuser none):   X = E[x]
//   full-bandwidth:          X_t = N_in(Fuse(s_{t-1}, e_t)) where fed back, N_in(e_t) where plain
//                            (input_norm fused_only: e_t where plain)
//   H = FinalNorm(Stack(X)),  logits = H E^T (tied) or H W_lm^T,  loss = mean CE
// Model<T> owns the ParamStore; its layers own only offsets. All activations live in a Workspace<T>
// that the caller owns and passes in (one PassCache per live pass), laid out once per shape.
// model/multipass.hpp builds the K-pass objective of spec section 3 on top of pass_forward/backward.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "../layers/block.hpp"
#include "../layers/fuser.hpp"
#include "../ops/embedding.hpp"
#include "../ops/shift.hpp"
#include "../ops/softmax_xent.hpp"
#include "config.hpp"

namespace fbt {

/// One pass's activations (STYLE 2.4: the multi-pass objective holds one per live pass). In a forward-only
/// workspace the layers share one cache and the residual stream alternates between two buffers (res[l]
/// is then valid only until layer l+1 overwrites it: read res[0] before stack_forward), but each layer
/// keeps its own keys and values (attn.kr, attn.v) for the decoder's prefill.
template <class T> struct PassCache {
  std::vector<T*> res;                              // L+1 of (N, D): res[0] = X, res[l+1] = block l's output
  std::vector<typename Block<T>::Cache> blocks;     // L
  T *hf, *rf;                                       // (N, D), (N)  final-norm output and rstd
  T* dhead;                                         // (N, D)  d(weighted loss of this pass) / d hf
  T *S, *u, *rin;                                   // (N, D), (N, D), (N)  shifted state, N_in input, N_in rstd
  T* mask;                                          // (N)  1 where the row is fed back, 0 where plain
  typename FeedbackFuser<T>::Cache fuser;
};

/// Everything a step needs besides the parameters: one arena, laid out for (B, T, slots, grad).
template <class T> struct Workspace {
  Arena<T> arena;
  const void* owner = nullptr;  ///< the model it was laid out for (a workspace is never shared between models)
  int B = 0, T_ = 0, slots = 0;
  bool grad = false;
  std::vector<int> pos, first;                      // (N)  RoPE positions, attention window starts
  std::vector<std::uint8_t> plain;                  // (N)  1 at a row's position 0 and at document starts
  T *e, *de;                                        // (N, D)  token embeddings and their gradient
  typename FeedbackFuser<T>::Shared fshared;
  T *logits, *losses, *lse;                         // (N, V), (N), (N)
  std::vector<PassCache<T>> pass;                   // slots
  // gradient scratch, shared by all passes
  T *dres, *dhf, *du, *ds, *noise;                  // (N, D) each
  T* carry[2];                                      // (N, D)  d source state handed from pass j to pass j-1
  typename Block<T>::Scratch bscratch;
  typename FeedbackFuser<T>::Scratch fscratch;
  int N() const { return B * T_; }
};

template <class T> class Model {
 public:
  ModelConfig cfg;
  ParamStore<T> params;
  std::vector<Block<T>> blocks;
  FeedbackFuser<T> fuser;
  RopeTable<T> rope;
  int D = 0, V = 0, L = 0;
  std::size_t embed = 0, lm_head = 0, final_norm = 0, in_norm = 0;

  /// Validates cfg, registers every tensor under its checkpoint name and initialises them from seed.
  explicit Model(const ModelConfig& c, std::uint64_t seed = 0) : cfg(c) {
    cfg.validate();
    D = cfg.hidden_size, V = cfg.vocab_size, L = cfg.num_hidden_layers;
    const double std = cfg.initializer_range, out_std = std / std::sqrt(2.0 * L);
    embed = params.add("model.embed_tokens.weight", {V, D}, Init::Normal, std);
    for (int l = 0; l < L; ++l) {
      blocks.emplace_back(cfg);
      blocks.back().declare(params, l, std, out_std);
    }
    final_norm = params.add("model.norm.weight", {D}, Init::Ones);
    if (!cfg.tie_word_embeddings) lm_head = params.add("lm_head.weight", {V, D}, Init::Normal, std);
    fuser = FeedbackFuser<T>(cfg);
    if (cfg.feedback()) {
      in_norm = params.add("model.feedback.in_norm.weight", {D}, Init::Ones);
      fuser.declare(params, cfg);
    }
    params.finalize();
    params.init(seed);
    rope = RopeTable<T>(cfg.max_position_embeddings, cfg.hs(), cfg.rope_theta);
  }

  bool feedback() const { return cfg.feedback(); }
  std::size_t head_offset() const { return cfg.tie_word_embeddings ? embed : lm_head; }
  /// Is the state fed back the final-norm output (default) rather than the last residual?
  bool post_norm_source() const { return cfg.feedback_source == "post_final_norm"; }

  /// \brief The arena layout of a workspace; run twice by Arena::build (count, then point).
  void layout(Arena<T>& a, Workspace<T>& w, int B, int Tn, int slots, bool grad) const {
    const std::size_t N = std::size_t(B) * Tn, ND = N * D;
    w.e = a.take(ND), w.de = grad ? a.take(ND) : nullptr;
    if (feedback()) fuser.alloc_shared(a, w.fshared, int(N));
    w.logits = a.take(N * V), w.losses = a.take(N), w.lse = a.take(N);
    w.pass.assign(slots, PassCache<T>{});
    for (auto& p : w.pass) {
      p.res.resize(L + 1);
      p.blocks.resize(L);
      if (grad) {  // backward reads every layer's activations (but the recomputed temporaries are shared)
        for (auto& r : p.res) r = a.take(ND);
        for (int l = 0; l < L; ++l) blocks[l].alloc(a, p.blocks[l], B, Tn, &p == &w.pass[0] && l == 0 ? nullptr : &w.pass[0].blocks[0]);
      } else {  // forward only: two residual buffers in turn and one block cache for all layers, except
                // each layer's keys and values, which a prefill commits to the KV cache
        T* rb[2] = {a.take(ND), a.take(ND)};
        for (int l = 0; l <= L; ++l) p.res[l] = rb[l % 2];
        typename Block<T>::Cache shared;
        blocks[0].alloc(a, shared, B, Tn);
        const std::size_t KD = std::size_t(cfg.num_key_value_heads) * cfg.hs();
        for (int l = 0; l < L; ++l) {
          p.blocks[l] = shared;
          p.blocks[l].attn.kr = a.take(N * KD), p.blocks[l].attn.v = a.take(N * KD);
        }
      }
      p.hf = a.take(ND), p.rf = a.take(N), p.dhead = grad ? a.take(ND) : nullptr;
      if (feedback()) {
        p.S = a.take(ND), p.u = a.take(ND), p.rin = a.take(N), p.mask = a.take(N);
        fuser.alloc(a, p.fuser, int(N));
      }
    }
    w.noise = feedback() ? a.take(ND) : nullptr;
    if (grad) {
      w.dres = a.take(ND), w.dhf = a.take(ND);
      blocks[0].alloc_scratch(a, w.bscratch, B, Tn);
      if (feedback()) {
        w.du = a.take(ND), w.ds = a.take(ND), w.carry[0] = a.take(ND), w.carry[1] = a.take(ND);
        fuser.alloc_scratch(a, w.fscratch, int(N));
      }
    }
  }
  /// Bytes a workspace for (B, T, slots, grad) needs: what a step will use, known before it runs.
  std::size_t workspace_bytes(int B, int Tn, int slots, bool grad) const {
    Workspace<T> w;
    return Arena<T>::measure([&](Arena<T>& a) { layout(a, w, B, Tn, slots, grad); }) * sizeof(T);
  }
  /// Lays the workspace out if its shape changed (the only allocation; a step itself allocates nothing).
  void prepare(Workspace<T>& w, int B, int Tn, int slots, bool grad) const {
    FBT_ASSERT(B > 0 && Tn > 0, "batch shape must be positive, got B=" + std::to_string(B) + " T=" + std::to_string(Tn));
    FBT_ASSERT(Tn <= cfg.max_position_embeddings, "sequence length T=" + std::to_string(Tn) + " exceeds max_position_embeddings=" +
                                                      std::to_string(cfg.max_position_embeddings));
    if (w.owner == this && w.B == B && w.T_ == Tn && w.slots == slots && w.grad == grad) return;
    w.arena.build([&](Arena<T>& a) { layout(a, w, B, Tn, slots, grad); });
    w.owner = this, w.B = B, w.T_ = Tn, w.slots = slots, w.grad = grad;
    w.pos.assign(std::size_t(B) * Tn, 0), w.first.assign(std::size_t(B) * Tn, 0), w.plain.assign(std::size_t(B) * Tn, 0);
  }

  /// \brief Embeds tokens (N) into w.e and fills the position tables from the document starts
  /// (doc_start (N) may be null: each row is one document). Under doc_attention "masked", RoPE positions
  /// restart at each document and attention stays inside it (spec invariant 6).
  void begin_batch(Workspace<T>& w, const int* tokens, const std::uint8_t* doc_start) const {
    const int B = w.B, Tn = w.T_;
    const bool masked = cfg.doc_attention == "masked";
    for (int b = 0; b < B; ++b) {
      int start = 0;
      for (int t = 0; t < Tn; ++t) {
        const std::size_t n = std::size_t(b) * Tn + t;
        const bool is_start = t == 0 || (doc_start && doc_start[n]);
        if (is_start) start = t;
        w.plain[n] = is_start;
        w.pos[n] = masked ? t - start : t;
        w.first[n] = masked ? start : 0;
      }
    }
    embedding_forward(smat(w.e, w.N(), D), tokens, csmat(params.values() + embed, V, D));
  }
  PassShape shape(const Workspace<T>& w) const { return PassShape{w.B, w.T_, w.pos.data(), w.first.data()}; }

  /// \brief Layer-0 input of a plain pass into p.res[0]: N_in(e) (input_norm all), else e.
  void plain_input(Workspace<T>& w, PassCache<T>& p) const {
    const int N = w.N();
    if (feedback() && cfg.input_norm == "all") {
      rmsnorm_forward(smat(p.res[0], N, D), vec(p.rin, N), csmat(w.e, N, D), cvec(params.values() + in_norm, D), T(cfg.rms_norm_eps));
      mat(p.u, N, D) = cmat(w.e, N, D);
      vec(p.mask, N).setZero();
    } else {
      mat(p.res[0], N, D) = cmat(w.e, N, D);
      if (feedback()) vec(p.mask, N).setZero();
    }
  }

  /// \brief Layer-0 input of a fed-back pass into p.res[0], from the previous pass's source state
  /// `src` (N, D) (plus noise, if given) and the plain-row rule: row (b, t) is fed back iff
  /// t >= max(prefix_b, 1) and t is not a document start. prefix (B) may be null (= 0).
  /// Requires fuser.shared_forward on w.e first.
  void fused_input(Workspace<T>& w, PassCache<T>& p, const T* src, const T* noise, const int* prefix) const {
    const int N = w.N(), B = w.B, Tn = w.T_;
    if (noise) {  // jitter the carried state (spec 3: one uniform draw per element, before shift_right)
      mat(w.noise, N, D) = cmat(src, N, D) + cmat(noise, N, D);
      src = w.noise;
    }
    shift_right_forward(smat(p.S, N, D), csmat(src, N, D), B, Tn);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < Tn; ++t) {
        const std::size_t n = std::size_t(b) * Tn + t;
        p.mask[n] = !w.plain[n] && t >= (prefix ? prefix[b] : 0) ? T(1) : T(0);
      }
    fuse_rows(N, w.e, p.S, p.mask, w.fshared, p.fuser, p.u, p.rin, p.res[0]);
  }

  /// \brief X (R, D) = layer-0 inputs of R rows: N_in(Fuse(S_r, e_r)) where mask_r = 1, else the plain
  /// input N_in(e_r) (e_r under input_norm fused_only). sh must hold fuser.shared_forward of e; c, u (R, D)
  /// and rin (R) are scratch that backward reads. Used by the training passes and by the decoder.
  void fuse_rows(int R, const T* e, const T* S, const T* mask, const typename FeedbackFuser<T>::Shared& sh,
                 typename FeedbackFuser<T>::Cache& c, T* u, T* rin, T* X) const {
    fuser.forward(params, sh, c, S, e, u, R);
    for (int n = 0; n < R; ++n)
      if (mask[n] == T(0)) mat(u, R, D).row(n) = cmat(e, R, D).row(n);
    rmsnorm_forward(smat(X, R, D), vec(rin, R), csmat(u, R, D), cvec(params.values() + in_norm, D), T(cfg.rms_norm_eps));
    if (cfg.input_norm == "fused_only")
      for (int n = 0; n < R; ++n)
        if (mask[n] == T(0)) mat(X, R, D).row(n) = cmat(e, R, D).row(n);
  }

  /// \brief Runs the stack and the final norm on p.res[0]: fills p.res[1..L], p.hf.
  void stack_forward(Workspace<T>& w, PassCache<T>& p) const {
    const PassShape s = shape(w);
    const int N = w.N();
    for (int l = 0; l < L; ++l) blocks[l].forward(params, p.blocks[l], p.res[l], p.res[l + 1], s, rope);
    rmsnorm_forward(smat(p.hf, N, D), vec(p.rf, N), csmat(p.res[L], N, D), cvec(params.values() + final_norm, D), T(cfg.rms_norm_eps));
  }
  /// The state this pass feeds to the next (spec 2: feedback_source).
  const T* source_state(const PassCache<T>& p) const { return post_norm_source() ? p.hf : p.res[L]; }

  /// \brief logits = hf W_head^T into w.logits, CE into w.losses. Returns (sum of losses, number of targets).
  /// With weight > 0 also writes p.dhead = d(weight * mean CE)/d hf and accumulates the head's gradient.
  std::pair<double, long> head_forward(Workspace<T>& w, PassCache<T>& p, const int* targets, double weight) {
    const int N = w.N();
    auto logits = mat(w.logits, N, V);
    linear_forward(smat(w.logits, N, V), csmat(p.hf, N, D), csmat(params.values() + head_offset(), V, D));
    long count = 0;
    for (int n = 0; n < N; ++n) count += targets[n] >= 0;
    const double sum = softmax_xent_forward(logits, vec(w.losses, N), vec(w.lse, N), targets, cfg.z_loss);
    if (weight > 0 && count > 0) {
      softmax_xent_backward(logits, cvec(w.lse, N), targets, weight / double(count), cfg.z_loss);
      zero(p.dhead, std::size_t(N) * D);
      T* G = params.grads();
      linear_backward(smat(p.dhead, N, D), smat(G + head_offset(), V, D), csmat(w.logits, N, V), csmat(p.hf, N, D),
                      csmat(params.values() + head_offset(), V, D));
    } else if (weight > 0) {
      zero(p.dhead, std::size_t(N) * D);
    }
    return {sum, count};
  }

  /// \brief Backward of one pass. On entry p.dhead holds this pass's loss gradient; carry_in (N, D)
  /// (or null) is d(later passes)/d(this pass's source state). Accumulates w.de, w.fshared.dpe and the
  /// parameter gradients; writes carry_out (N, D) = d/d(previous pass's source state) when non-null.
  void pass_backward(Workspace<T>& w, PassCache<T>& p, bool fed_back, const T* carry_in, T* carry_out) {
    const int N = w.N();
    const std::size_t ND = std::size_t(N) * D;
    const PassShape s = shape(w);
    const T* P = params.values();
    T* G = params.grads();
    mat(w.dhf, N, D) = cmat(p.dhead, N, D);
    if (carry_in && post_norm_source()) mat(w.dhf, N, D) += cmat(carry_in, N, D);
    zero(w.dres, ND);
    rmsnorm_backward(smat(w.dres, N, D), vec(G + final_norm, D), csmat(w.dhf, N, D), csmat(p.res[L], N, D), cvec(P + final_norm, D),
                     cvec(p.rf, N));
    if (carry_in && !post_norm_source()) mat(w.dres, N, D) += cmat(carry_in, N, D);
    for (int l = L - 1; l >= 0; --l) blocks[l].backward(params, p.blocks[l], w.bscratch, w.dres, p.res[l], s, rope);
    // w.dres = dX, the gradient w.r.t. the layer-0 input
    auto dX = mat(w.dres, N, D);
    auto de = mat(w.de, N, D);
    if (!feedback()) {
      de += dX;
      return;
    }
    const bool norm_all = cfg.input_norm == "all";
    if (!fed_back) {  // plain pass: X = N_in(e) or e
      if (norm_all) rmsnorm_backward(smat(w.de, N, D), vec(G + in_norm, D), csmat(w.dres, N, D), csmat(w.e, N, D), cvec(P + in_norm, D), cvec(p.rin, N));
      else de += dX;
      return;
    }
    // fed-back pass: plain rows go to e, fed-back rows through N_in and the fuser
    auto du = mat(w.du, N, D);
    if (!norm_all)
      for (int n = 0; n < N; ++n)
        if (p.mask[n] == T(0)) de.row(n) += dX.row(n), dX.row(n).setZero();
    zero(w.du, ND);
    rmsnorm_backward(smat(w.du, N, D), vec(G + in_norm, D), csmat(w.dres, N, D), csmat(p.u, N, D), cvec(P + in_norm, D), cvec(p.rin, N));
    for (int n = 0; n < N; ++n)
      if (p.mask[n] == T(0)) de.row(n) += du.row(n), du.row(n).setZero();
    if (carry_out) zero(w.ds, ND);
    fuser.backward(params, w.fshared, p.fuser, w.fscratch, w.du, carry_out ? w.ds : nullptr, w.de, p.S, N);
    if (carry_out) {
      zero(carry_out, ND);
      shift_right_backward(smat(carry_out, N, D), csmat(w.ds, N, D), w.B, w.T_);
    }
  }

  /// \brief Last step of backward: the fuser's e-side gradient and the embedding scatter.
  void finish_backward(Workspace<T>& w, const int* tokens, bool any_fed_back) {
    const int N = w.N();
    if (feedback() && any_fed_back) fuser.shared_backward(params, w.fshared, w.e, w.de, N);
    embedding_backward(smat(params.grads() + embed, V, D), csmat(w.de, N, D), tokens);
  }
};

}  // namespace fbt
