// fbt/layers/attention.hpp: Qwen3-style causal self-attention (spec sections 1 and 9), built from its
// own AttentionSpec.
//
//   q = x Wq^T, k = x Wk^T, v = x Wv^T            (N, NH*hs), (N, NKV*hs), (N, NKV*hs)
//   q, k <- RMSNorm per head (QK-norm, one gain shared by all heads), then RoPE (rotate-half)
//   o = attention(q, k, v)  (GQA, causal, document-masked)     (N, NH*hs)
//       sliding window W (Hugging Face Qwen3's sliding_attention layers): query t sees keys t-W < j <= t
//       only (PassShape::first_for); decoding keeps the last W positions as a ring (decode/decoder.hpp)
//   y += o Wo^T                                                (N, D)    (accumulated into the residual)
// Parameters (under the scope the block gives, e.g. model.layers.{i}.self_attn.): {q,k,v,o}_proj.weight,
// {q,k}_norm.weight. The RoPE table (max_positions, hs/2) is a constant shared by every layer of the same
// head size and theta. What attention keeps for backward is the backend's choice (the CPU keeps the
// probabilities, a GPU the logsumexp): the cache holds `att`, sized by the backend.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "../ops/rope.hpp"
#include "rmsnorm.hpp"

namespace fbt {

/// The sizes of one attention layer.
struct AttentionSpec {
  int hidden_size = 0;          ///< D
  int num_heads = 0;            ///< NH
  int num_kv_heads = 0;         ///< NKV, divides NH
  int head_dim = 0;             ///< hs, even (rotate-half RoPE)
  bool qk_norm = true;          ///< Qwen3 per-head RMSNorm on q and k
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int max_positions = 4096;     ///< rows of the RoPE table: the longest sequence
  double init_std = 0.02;       ///< q, k, v projections
  double out_std = 0.02;        ///< o_proj (depth-scaled by the model: std / sqrt(2L))
  int sliding_window = 0;       ///< W: each query sees its last W positions (itself included); 0 = every earlier one
};

template <class T> struct CausalSelfAttention {
  using Scalar = T;
  using Spec = AttentionSpec;
  Spec spec;
  int D = 0, NH = 0, NKV = 0, hs = 0;
  RMSNorm<T> q_norm, k_norm;                     // per head (hs)
  std::size_t wq = 0, wk = 0, wv = 0, wo = 0;    // offsets in the ParamStore
  std::size_t rope = 0;                          // offset of the RoPE table in the constants

  /// One pass's activations (what backward needs) and backward's scratch (temporaries).
  struct Cache {
    T *q, *k, *v;    // (N, NH*hs), (N, NKV*hs), (N, NKV*hs)  raw projections (q, k alias qr, kr without QK-norm)
    T *rq, *rk;      // (N*NH), (N*NKV)  QK-norm rstd
    T *qr, *kr;      // (N, NH*hs), (N, NKV*hs)  after QK-norm and RoPE: what attention saw (kr, v: what a prefill commits)
    T* att;          // backend-sized attention state (CPU: (B, NH, T, T) probabilities)
    T* ao;           // (N, NH*hs)  attention output before o_proj
    // backward's scratch (temporaries; null without grad)
    T *dao, *dqr, *dkr, *dv, *dqn, *dkn;  // (N, NH*hs), (N, NH*hs), (N, NKV*hs) x 2, (N, NH*hs), (N, NKV*hs)
    T* datt;                              // backend-sized attention scratch (CPU: (T, T))
  };
  /// One decoding step's buffers for R rows.
  struct DecodeCache {
    T *q, *k, *v, *ao;  // (R, NH*hs), (R, NKV*hs) x 2, (R, NH*hs)
    T* rstd;            // (R*NH)
  };

  CausalSelfAttention() = default;
  explicit CausalSelfAttention(const Spec& s)
      : spec(s), D(s.hidden_size), NH(s.num_heads), NKV(s.num_kv_heads), hs(s.head_dim), q_norm(s.head_dim, s.rms_norm_eps),
        k_norm(s.head_dim, s.rms_norm_eps) {
    FBT_ASSERT(D > 0 && NH > 0 && NKV > 0 && hs > 0, "CausalSelfAttention: sizes must be > 0");
    FBT_ASSERT(NH % NKV == 0, "CausalSelfAttention: num_kv_heads (" + std::to_string(NKV) + ") must divide num_heads (" + std::to_string(NH) + ")");
    FBT_ASSERT(hs % 2 == 0, "CausalSelfAttention: head_dim must be even for RoPE, got " + std::to_string(hs));
    FBT_ASSERT(s.max_positions > 0, "CausalSelfAttention: max_positions must be > 0");
  }

  int kv_width() const { return NKV * hs; }  ///< KD: one position's keys (and values) in a KV cache

  void declare(const ParamRegistry<T>& r) {
    wq = r.add("q_proj.weight", {NH * hs, D}, Init::Normal, spec.init_std);
    wk = r.add("k_proj.weight", {NKV * hs, D}, Init::Normal, spec.init_std);
    wv = r.add("v_proj.weight", {NKV * hs, D}, Init::Normal, spec.init_std);
    wo = r.add("o_proj.weight", {D, NH * hs}, Init::Normal, spec.out_std);
    if (spec.qk_norm) q_norm.declare(r.scope("q_norm")), k_norm.declare(r.scope("k_norm"));
    const int maxp = spec.max_positions, h = hs;
    const double theta = spec.rope_theta;
    char key[96];
    std::snprintf(key, sizeof key, "rope:%d:%d:%.17g", maxp, h, theta);
    rope = r.constant(key, std::size_t(maxp) * h, [=](T* p) { rope_fill(p, maxp, h, theta); });
  }
  RopeView<T> rope_view(const Weights<T>& w) const {
    const std::size_t half = std::size_t(hs) / 2, rows = std::size_t(spec.max_positions);
    return RopeView<T>{w.consts + rope, w.consts + rope + rows * half, spec.max_positions, int(half)};
  }

  /// Lays out a pass's cache (layers/contract.hpp): with grad, what backward reads is kept and its scratch
  /// is temporary; without, only the rotated keys and the values (a prefill commits them) are kept.
  template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache& c, int B, int Tn, bool grad) const {
    const std::size_t N = std::size_t(B) * Tn;
    Carver<T>& a = grad ? keep : temp;
    c.kr = keep.take(N * NKV * hs), c.v = keep.take(N * NKV * hs);
    c.qr = a.take(N * NH * hs);
    if (spec.qk_norm) {
      c.q = a.take(N * NH * hs), c.k = a.take(N * NKV * hs), c.rq = a.take(N * NH), c.rk = a.take(N * NKV);
    } else {  // project straight into qr, kr and rotate in place
      c.q = c.qr, c.k = c.kr, c.rq = c.rk = nullptr;
    }
    c.att = a.take(Be::attention_state_size(B, Tn, NH));
    c.ao = a.take(N * NH * hs);
    c.dao = c.dqr = c.dkr = c.dv = c.dqn = c.dkn = c.datt = nullptr;
    if (!grad) return;
    c.dao = temp.take(N * NH * hs), c.dqr = temp.take(N * NH * hs), c.dkr = temp.take(N * NKV * hs), c.dv = temp.take(N * NKV * hs);
    c.dqn = temp.take(N * NH * hs), c.dkn = temp.take(N * NKV * hs), c.datt = temp.take(Be::attention_scratch_size(B, Tn, NH));
  }
  template <class Be> void alloc_decode(const Be&, Carver<T>& a, DecodeCache& c, int R) const {
    c.q = a.take(std::size_t(R) * NH * hs), c.k = a.take(std::size_t(R) * NKV * hs), c.v = a.take(std::size_t(R) * NKV * hs);
    c.ao = a.take(std::size_t(R) * NH * hs), c.rstd = a.take(std::size_t(R) * NH);
  }

  /// \brief y (N, D) += o_proj(attention(x)); fills c. x (N, D) is the normalised block input.
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* x, T* y, const PassShape& s) const {
    const int N = s.N(), QD = NH * hs, KD = NKV * hs;
    linear(be, c.q, x, w.value + wq, N, QD, D, D, false);
    linear(be, c.k, x, w.value + wk, N, KD, D, D, false);
    linear(be, c.v, x, w.value + wv, N, KD, D, D, false);
    if (spec.qk_norm) {  // per head: view (N, NH*hs) as (N*NH, hs); the normed q, k go straight into qr, kr
      q_norm.forward(be, w, c.qr, c.rq, c.q, N * NH);
      k_norm.forward(be, w, c.kr, c.rk, c.k, N * NKV);
    }
    const RopeView<T> rv = rope_view(w);
    be.rope_forward(c.qr, c.qr, s.pos, rv, N, NH);  // in place
    be.rope_forward(c.kr, c.kr, s.pos, rv, N, NKV);
    be.attention_forward(c.ao, c.att, c.qr, c.kr, c.v, s.first_for(spec.sliding_window), s.B, s.T, NH, NKV, hs);
    linear(be, y, c.ao, w.value + wo, N, D, QD, QD, true);
  }

  /// \brief Given dy (N, D), accumulates dx (N, D) and the parameter gradients.
  template <class Be> void backward(Be& be, const Weights<T>& w, const Cache& c, const T* dy, T* dx, const T* x, const PassShape& s) const {
    const int N = s.N(), QD = NH * hs, KD = NKV * hs;
    const std::size_t NQ = std::size_t(N) * QD, NK = std::size_t(N) * KD;
    be.zero(c.dao, NQ), be.zero(c.dqr, NQ), be.zero(c.dkr, NK), be.zero(c.dv, NK);
    linear_backward(be, c.dao, w.grad + wo, dy, c.ao, w.value + wo, N, D, QD, QD);
    be.attention_backward(c.dqr, c.dkr, c.dv, c.datt, c.dao, c.ao, c.att, c.qr, c.kr, c.v, s.first_for(spec.sliding_window), s.B, s.T, NH, NKV, hs);
    // RoPE backward into dqn/dkn; with QK-norm they then go through the per-head norm into dq/dk
    T* dq = c.dqn;
    T* dk = c.dkn;
    be.zero(c.dqn, NQ), be.zero(c.dkn, NK);
    const RopeView<T> rv = rope_view(w);
    be.rope_backward(c.dqn, c.dqr, s.pos, rv, N, NH);
    be.rope_backward(c.dkn, c.dkr, s.pos, rv, N, NKV);
    if (spec.qk_norm) {  // reuse dqr/dkr as dq/dk (their contents were consumed above)
      dq = c.dqr, dk = c.dkr;
      be.zero(dq, NQ), be.zero(dk, NK);
      q_norm.backward(be, w, dq, c.dqn, c.q, c.rq, N * NH);
      k_norm.backward(be, w, dk, c.dkn, c.k, c.rk, N * NKV);
    }
    linear_backward(be, dx, w.grad + wq, dq, x, w.value + wq, N, QD, D, D);
    linear_backward(be, dx, w.grad + wk, dk, x, w.value + wk, N, KD, D, D);
    linear_backward(be, dx, w.grad + wv, c.dv, x, w.value + wv, N, KD, D, D);
  }

  /// \brief One decoding step: y (R, D) += o_proj(attention of each new position against its sequence's
  /// cache); the new keys and values are appended to the cache first. x (R, D) is the normalised input.
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache& c, const T* x, T* y, const DecodeStep<T>& st) const {
    const int R = st.R, QD = NH * hs, KD = NKV * hs;
    linear(be, c.q, x, w.value + wq, R, QD, D, D, false);
    linear(be, c.k, x, w.value + wk, R, KD, D, D, false);
    linear(be, c.v, x, w.value + wv, R, KD, D, D, false);
    if (spec.qk_norm) {
      q_norm.forward(be, w, c.q, c.rstd, c.q, R * NH);
      k_norm.forward(be, w, c.k, c.rstd, c.k, R * NKV);
    }
    const RopeView<T> rv = rope_view(w);
    be.rope_forward(c.q, c.q, st.pos, rv, R, NH);
    be.rope_forward(c.k, c.k, st.pos, rv, R, NKV);
    be.kv_append(st.kc, st.vc, c.k, c.v, st.slot ? st.slot : st.pos, R, KD);  // a sliding layer's ring: slot pos % W
    be.attention_decode(c.ao, c.q, st.kc, st.vc, st.len1, st.max_len1, R, NH, NKV, hs);
    linear(be, y, c.ao, w.value + wo, R, D, QD, QD, true);
  }

  /// The rotated keys and the values (N, KD) of a forward: what a prefill commits to the KV cache.
  std::pair<const T*, const T*> kv(const Cache& c) const { return {c.kr, c.v}; }
};

}  // namespace fbt
